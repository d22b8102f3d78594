// Original file: ../../proto/csi/v1/csi.proto

import type { ControllerServiceCapability as _csi_v1_ControllerServiceCapability, ControllerServiceCapability__Output as _csi_v1_ControllerServiceCapability__Output } from '../../csi/v1/ControllerServiceCapability';

export interface ControllerGetCapabilitiesResponse {
  'capabilities'?: (_csi_v1_ControllerServiceCapability)[];
}

export interface ControllerGetCapabilitiesResponse__Output {
  'capabilities': (_csi_v1_ControllerServiceCapability__Output)[];
}
