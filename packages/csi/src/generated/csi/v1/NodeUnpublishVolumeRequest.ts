// Original file: ../../proto/csi/v1/csi.proto


export interface NodeUnpublishVolumeRequest {
  'volumeId'?: (string);
  'targetPath'?: (string);
}

export interface NodeUnpublishVolumeRequest__Output {
  'volumeId': (string);
  'targetPath': (string);
}
