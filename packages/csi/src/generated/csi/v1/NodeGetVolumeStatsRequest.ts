// Original file: ../../proto/csi/v1/csi.proto


export interface NodeGetVolumeStatsRequest {
  'volumeId'?: (string);
  'volumePath'?: (string);
  'stagingTargetPath'?: (string);
}

export interface NodeGetVolumeStatsRequest__Output {
  'volumeId': (string);
  'volumePath': (string);
  'stagingTargetPath': (string);
}
