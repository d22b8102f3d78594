// Original file: ../../proto/csi/v1/csi.proto

import type { Long } from '@grpc/proto-loader';

export interface CapacityRange {
  'requiredBytes'?: (number | string | Long);
  'limitBytes'?: (number | string | Long);
}

export interface CapacityRange__Output {
  'requiredBytes': (string);
  'limitBytes': (string);
}
