// Original file: ../../proto/csi/v1/csi.proto


export interface ListVolumesRequest {
  'maxEntries'?: (number);
  'startingToken'?: (string);
}

export interface ListVolumesRequest__Output {
  'maxEntries': (number);
  'startingToken': (string);
}
