// Original file: ../../proto/csi/v1/csi.proto


export interface VolumeCondition {
  'abnormal'?: (boolean);
  'message'?: (string);
}

export interface VolumeCondition__Output {
  'abnormal': (boolean);
  'message': (string);
}
