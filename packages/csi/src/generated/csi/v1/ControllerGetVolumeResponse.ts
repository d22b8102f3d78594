// Original file: ../../proto/csi/v1/csi.proto

import type { Volume as _csi_v1_Volume, Volume__Output as _csi_v1_Volume__Output } from '../../csi/v1/Volume';
import type { VolumeCondition as _csi_v1_VolumeCondition, VolumeCondition__Output as _csi_v1_VolumeCondition__Output } from '../../csi/v1/VolumeCondition';

export interface _csi_v1_ControllerGetVolumeResponse_VolumeStatus {
  'publishedNodeIds'?: (string)[];
  'volumeCondition'?: (_csi_v1_VolumeCondition | null);
}

export interface _csi_v1_ControllerGetVolumeResponse_VolumeStatus__Output {
  'publishedNodeIds': (string)[];
  'volumeCondition': (_csi_v1_VolumeCondition__Output | null);
}

export interface ControllerGetVolumeResponse {
  'volume'?: (_csi_v1_Volume | null);
  'status'?: (_csi_v1_ControllerGetVolumeResponse_VolumeStatus | null);
}

export interface ControllerGetVolumeResponse__Output {
  'volume': (_csi_v1_Volume__Output | null);
  'status': (_csi_v1_ControllerGetVolumeResponse_VolumeStatus__Output | null);
}
