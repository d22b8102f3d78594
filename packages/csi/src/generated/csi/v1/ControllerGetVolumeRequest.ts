// Original file: ../../proto/csi/v1/csi.proto


export interface ControllerGetVolumeRequest {
  'volumeId'?: (string);
}

export interface ControllerGetVolumeRequest__Output {
  'volumeId': (string);
}
