// Original file: ../../proto/csi/v1/csi.proto


export interface ControllerUnpublishVolumeRequest {
  'volumeId'?: (string);
  'nodeId'?: (string);
  'secrets'?: ({[key: string]: string});
}

export interface ControllerUnpublishVolumeRequest__Output {
  'volumeId': (string);
  'nodeId': (string);
  'secrets': ({[key: string]: string});
}
