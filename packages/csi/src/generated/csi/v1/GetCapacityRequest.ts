// Original file: ../../proto/csi/v1/csi.proto

import type { VolumeCapability as _csi_v1_VolumeCapability, VolumeCapability__Output as _csi_v1_VolumeCapability__Output } from '../../csi/v1/VolumeCapability';
import type { Topology as _csi_v1_Topology, Topology__Output as _csi_v1_Topology__Output } from '../../csi/v1/Topology';

export interface GetCapacityRequest {
  'volumeCapabilities'?: (_csi_v1_VolumeCapability)[];
  'parameters'?: ({[key: string]: string});
  'accessibleTopology'?: (_csi_v1_Topology | null);
}

export interface GetCapacityRequest__Output {
  'volumeCapabilities': (_csi_v1_VolumeCapability__Output)[];
  'parameters': ({[key: string]: string});
  'accessibleTopology': (_csi_v1_Topology__Output | null);
}
