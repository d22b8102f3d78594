// Original file: ../../proto/csi/v1/csi.proto

import type { VolumeContentSource as _csi_v1_VolumeContentSource, VolumeContentSource__Output as _csi_v1_VolumeContentSource__Output } from '../../csi/v1/VolumeContentSource';
import type { Topology as _csi_v1_Topology, Topology__Output as _csi_v1_Topology__Output } from '../../csi/v1/Topology';
import type { Long } from '@grpc/proto-loader';

export interface Volume {
  'capacityBytes'?: (number | string | Long);
  'volumeId'?: (string);
  'volumeContext'?: ({[key: string]: string});
  'contentSource'?: (_csi_v1_VolumeContentSource | null);
  'accessibleTopology'?: (_csi_v1_Topology)[];
}

export interface Volume__Output {
  'capacityBytes': (string);
  'volumeId': (string);
  'volumeContext': ({[key: string]: string});
  'contentSource': (_csi_v1_VolumeContentSource__Output | null);
  'accessibleTopology': (_csi_v1_Topology__Output)[];
}
