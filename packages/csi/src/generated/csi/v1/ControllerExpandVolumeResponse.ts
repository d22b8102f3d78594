// Original file: ../../proto/csi/v1/csi.proto

import type { Long } from '@grpc/proto-loader';

export interface ControllerExpandVolumeResponse {
  'capacityBytes'?: (number | string | Long);
  'nodeExpansionRequired'?: (boolean);
}

export interface ControllerExpandVolumeResponse__Output {
  'capacityBytes': (string);
  'nodeExpansionRequired': (boolean);
}
