// Original file: ../../proto/csi/v1/csi.proto


export interface ControllerPublishVolumeResponse {
  'publishContext'?: ({[key: string]: string});
}

export interface ControllerPublishVolumeResponse__Output {
  'publishContext': ({[key: string]: string});
}
