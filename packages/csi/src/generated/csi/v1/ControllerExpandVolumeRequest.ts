// Original file: ../../proto/csi/v1/csi.proto

import type { CapacityRange as _csi_v1_CapacityRange, CapacityRange__Output as _csi_v1_CapacityRange__Output } from '../../csi/v1/CapacityRange';
import type { VolumeCapability as _csi_v1_VolumeCapability, VolumeCapability__Output as _csi_v1_VolumeCapability__Output } from '../../csi/v1/VolumeCapability';

export interface ControllerExpandVolumeRequest {
  'volumeId'?: (string);
  'capacityRange'?: (_csi_v1_CapacityRange | null);
  'secrets'?: ({[key: string]: string});
  'volumeCapability'?: (_csi_v1_VolumeCapability | null);
}

export interface ControllerExpandVolumeRequest__Output {
  'volumeId': (string);
  'capacityRange': (_csi_v1_CapacityRange__Output | null);
  'secrets': ({[key: string]: string});
  'volumeCapability': (_csi_v1_VolumeCapability__Output | null);
}
