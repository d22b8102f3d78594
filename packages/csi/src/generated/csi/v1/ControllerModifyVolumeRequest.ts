// Original file: ../../proto/csi/v1/csi.proto


export interface ControllerModifyVolumeRequest {
  'volumeId'?: (string);
  'secrets'?: ({[key: string]: string});
  'mutableParameters'?: ({[key: string]: string});
}

export interface ControllerModifyVolumeRequest__Output {
  'volumeId': (string);
  'secrets': ({[key: string]: string});
  'mutableParameters': ({[key: string]: string});
}
