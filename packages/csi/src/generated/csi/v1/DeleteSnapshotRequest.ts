// Original file: ../../proto/csi/v1/csi.proto


export interface DeleteSnapshotRequest {
  'snapshotId'?: (string);
  'secrets'?: ({[key: string]: string});
}

export interface DeleteSnapshotRequest__Output {
  'snapshotId': (string);
  'secrets': ({[key: string]: string});
}
