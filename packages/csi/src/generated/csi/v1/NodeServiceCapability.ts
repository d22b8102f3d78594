// Original file: ../../proto/csi/v1/csi.proto


export interface _csi_v1_NodeServiceCapability_RPC {
  'type'?: (_csi_v1_NodeServiceCapability_RPC_Type);
}

export interface _csi_v1_NodeServiceCapability_RPC__Output {
  'type': (_csi_v1_NodeServiceCapability_RPC_Type__Output);
}

// Original file: ../../proto/csi/v1/csi.proto

export const _csi_v1_NodeServiceCapability_RPC_Type = {
  UNKNOWN: 'UNKNOWN',
  STAGE_UNSTAGE_VOLUME: 'STAGE_UNSTAGE_VOLUME',
  GET_VOLUME_STATS: 'GET_VOLUME_STATS',
  EXPAND_VOLUME: 'EXPAND_VOLUME',
  VOLUME_CONDITION: 'VOLUME_CONDITION',
  SINGLE_NODE_MULTI_WRITER: 'SINGLE_NODE_MULTI_WRITER',
  VOLUME_MOUNT_GROUP: 'VOLUME_MOUNT_GROUP',
} as const;

export type _csi_v1_NodeServiceCapability_RPC_Type =
  | 'UNKNOWN'
  | 0
  | 'STAGE_UNSTAGE_VOLUME'
  | 1
  | 'GET_VOLUME_STATS'
  | 2
  | 'EXPAND_VOLUME'
  | 3
  | 'VOLUME_CONDITION'
  | 4
  | 'SINGLE_NODE_MULTI_WRITER'
  | 5
  | 'VOLUME_MOUNT_GROUP'
  | 6

export type _csi_v1_NodeServiceCapability_RPC_Type__Output = typeof _csi_v1_NodeServiceCapability_RPC_Type[keyof typeof _csi_v1_NodeServiceCapability_RPC_Type]

export interface NodeServiceCapability {
  'rpc'?: (_csi_v1_NodeServiceCapability_RPC | null);
  'type'?: "rpc";
}

export interface NodeServiceCapability__Output {
  'rpc'?: (_csi_v1_NodeServiceCapability_RPC__Output | null);
  'type'?: "rpc";
}
