// Original file: ../../proto/csi/v1/csi.proto

import type { Int64Value as _google_protobuf_Int64Value, Int64Value__Output as _google_protobuf_Int64Value__Output } from '../../google/protobuf/Int64Value';
import type { Long } from '@grpc/proto-loader';

export interface GetCapacityResponse {
  'availableCapacity'?: (number | string | Long);
  'maximumVolumeSize'?: (_google_protobuf_Int64Value | null);
  'minimumVolumeSize'?: (_google_protobuf_Int64Value | null);
}

export interface GetCapacityResponse__Output {
  'availableCapacity': (string);
  'maximumVolumeSize': (_google_protobuf_Int64Value__Output | null);
  'minimumVolumeSize': (_google_protobuf_Int64Value__Output | null);
}
