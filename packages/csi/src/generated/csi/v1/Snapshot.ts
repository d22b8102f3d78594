// Original file: ../../proto/csi/v1/csi.proto

import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../google/protobuf/Timestamp';
import type { Long } from '@grpc/proto-loader';

export interface Snapshot {
  'sizeBytes'?: (number | string | Long);
  'snapshotId'?: (string);
  'sourceVolumeId'?: (string);
  'creationTime'?: (_google_protobuf_Timestamp | null);
  'readyToUse'?: (boolean);
  'groupSnapshotId'?: (string);
}

export interface Snapshot__Output {
  'sizeBytes': (string);
  'snapshotId': (string);
  'sourceVolumeId': (string);
  'creationTime': (_google_protobuf_Timestamp__Output | null);
  'readyToUse': (boolean);
  'groupSnapshotId': (string);
}
