// Original file: ../../proto/csi/v1/csi.proto

import type { Long } from '@grpc/proto-loader';

// Original file: ../../proto/csi/v1/csi.proto

export const _csi_v1_VolumeUsage_Unit = {
  UNKNOWN: 'UNKNOWN',
  BYTES: 'BYTES',
  INODES: 'INODES',
} as const;

export type _csi_v1_VolumeUsage_Unit =
  | 'UNKNOWN'
  | 0
  | 'BYTES'
  | 1
  | 'INODES'
  | 2

export type _csi_v1_VolumeUsage_Unit__Output = typeof _csi_v1_VolumeUsage_Unit[keyof typeof _csi_v1_VolumeUsage_Unit]

export interface VolumeUsage {
  'available'?: (number | string | Long);
  'total'?: (number | string | Long);
  'used'?: (number | string | Long);
  'unit'?: (_csi_v1_VolumeUsage_Unit);
}

export interface VolumeUsage__Output {
  'available': (string);
  'total': (string);
  'used': (string);
  'unit': (_csi_v1_VolumeUsage_Unit__Output);
}
