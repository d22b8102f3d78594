// Original file: ../../proto/csi/v1/csi.proto

import type { BoolValue as _google_protobuf_BoolValue, BoolValue__Output as _google_protobuf_BoolValue__Output } from '../../google/protobuf/BoolValue';

export interface ProbeResponse {
  'ready'?: (_google_protobuf_BoolValue | null);
}

export interface ProbeResponse__Output {
  'ready': (_google_protobuf_BoolValue__Output | null);
}
