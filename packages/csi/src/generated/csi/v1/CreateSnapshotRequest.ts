// Original file: ../../proto/csi/v1/csi.proto


export interface CreateSnapshotRequest {
  'sourceVolumeId'?: (string);
  'name'?: (string);
  'secrets'?: ({[key: string]: string});
  'parameters'?: ({[key: string]: string});
}

export interface CreateSnapshotRequest__Output {
  'sourceVolumeId': (string);
  'name': (string);
  'secrets': ({[key: string]: string});
  'parameters': ({[key: string]: string});
}
