// Friendly names for the generated CSI message types. Request types are the
// permissive input shapes; Response types are what the client returns.
export type { GetPluginInfoRequest, GetPluginInfoRequest__Output } from './generated/csi/v1/GetPluginInfoRequest';
export type { GetPluginInfoResponse__Output as GetPluginInfoResponse } from './generated/csi/v1/GetPluginInfoResponse';
export type { GetPluginCapabilitiesRequest, GetPluginCapabilitiesRequest__Output } from './generated/csi/v1/GetPluginCapabilitiesRequest';
export type { GetPluginCapabilitiesResponse__Output as GetPluginCapabilitiesResponse } from './generated/csi/v1/GetPluginCapabilitiesResponse';
export type { ProbeRequest, ProbeRequest__Output } from './generated/csi/v1/ProbeRequest';
export type { ProbeResponse__Output as ProbeResponse } from './generated/csi/v1/ProbeResponse';
export type { CreateVolumeRequest, CreateVolumeRequest__Output } from './generated/csi/v1/CreateVolumeRequest';
export type { CreateVolumeResponse__Output as CreateVolumeResponse } from './generated/csi/v1/CreateVolumeResponse';
export type { DeleteVolumeRequest, DeleteVolumeRequest__Output } from './generated/csi/v1/DeleteVolumeRequest';
export type { DeleteVolumeResponse__Output as DeleteVolumeResponse } from './generated/csi/v1/DeleteVolumeResponse';
export type {
  ControllerPublishVolumeRequest,
  ControllerPublishVolumeRequest__Output,
} from './generated/csi/v1/ControllerPublishVolumeRequest';
export type { ControllerPublishVolumeResponse__Output as ControllerPublishVolumeResponse } from './generated/csi/v1/ControllerPublishVolumeResponse';
export type {
  ControllerUnpublishVolumeRequest,
  ControllerUnpublishVolumeRequest__Output,
} from './generated/csi/v1/ControllerUnpublishVolumeRequest';
export type { ControllerUnpublishVolumeResponse__Output as ControllerUnpublishVolumeResponse } from './generated/csi/v1/ControllerUnpublishVolumeResponse';
export type {
  ValidateVolumeCapabilitiesRequest,
  ValidateVolumeCapabilitiesRequest__Output,
} from './generated/csi/v1/ValidateVolumeCapabilitiesRequest';
export type { ValidateVolumeCapabilitiesResponse__Output as ValidateVolumeCapabilitiesResponse } from './generated/csi/v1/ValidateVolumeCapabilitiesResponse';
export type { ListVolumesRequest, ListVolumesRequest__Output } from './generated/csi/v1/ListVolumesRequest';
export type { ListVolumesResponse__Output as ListVolumesResponse } from './generated/csi/v1/ListVolumesResponse';
export type { GetCapacityRequest, GetCapacityRequest__Output } from './generated/csi/v1/GetCapacityRequest';
export type { GetCapacityResponse__Output as GetCapacityResponse } from './generated/csi/v1/GetCapacityResponse';
export type {
  ControllerGetCapabilitiesRequest,
  ControllerGetCapabilitiesRequest__Output,
} from './generated/csi/v1/ControllerGetCapabilitiesRequest';
export type { ControllerGetCapabilitiesResponse__Output as ControllerGetCapabilitiesResponse } from './generated/csi/v1/ControllerGetCapabilitiesResponse';
export type { CreateSnapshotRequest, CreateSnapshotRequest__Output } from './generated/csi/v1/CreateSnapshotRequest';
export type { CreateSnapshotResponse__Output as CreateSnapshotResponse } from './generated/csi/v1/CreateSnapshotResponse';
export type { DeleteSnapshotRequest, DeleteSnapshotRequest__Output } from './generated/csi/v1/DeleteSnapshotRequest';
export type { DeleteSnapshotResponse__Output as DeleteSnapshotResponse } from './generated/csi/v1/DeleteSnapshotResponse';
export type { ListSnapshotsRequest, ListSnapshotsRequest__Output } from './generated/csi/v1/ListSnapshotsRequest';
export type { ListSnapshotsResponse__Output as ListSnapshotsResponse } from './generated/csi/v1/ListSnapshotsResponse';
export type {
  ControllerExpandVolumeRequest,
  ControllerExpandVolumeRequest__Output,
} from './generated/csi/v1/ControllerExpandVolumeRequest';
export type { ControllerExpandVolumeResponse__Output as ControllerExpandVolumeResponse } from './generated/csi/v1/ControllerExpandVolumeResponse';
export type { ControllerGetVolumeRequest, ControllerGetVolumeRequest__Output } from './generated/csi/v1/ControllerGetVolumeRequest';
export type { ControllerGetVolumeResponse__Output as ControllerGetVolumeResponse } from './generated/csi/v1/ControllerGetVolumeResponse';
export type {
  ControllerModifyVolumeRequest,
  ControllerModifyVolumeRequest__Output,
} from './generated/csi/v1/ControllerModifyVolumeRequest';
export type { ControllerModifyVolumeResponse__Output as ControllerModifyVolumeResponse } from './generated/csi/v1/ControllerModifyVolumeResponse';
export type { NodeStageVolumeRequest, NodeStageVolumeRequest__Output } from './generated/csi/v1/NodeStageVolumeRequest';
export type { NodeStageVolumeResponse__Output as NodeStageVolumeResponse } from './generated/csi/v1/NodeStageVolumeResponse';
export type { NodeUnstageVolumeRequest, NodeUnstageVolumeRequest__Output } from './generated/csi/v1/NodeUnstageVolumeRequest';
export type { NodeUnstageVolumeResponse__Output as NodeUnstageVolumeResponse } from './generated/csi/v1/NodeUnstageVolumeResponse';
export type { NodePublishVolumeRequest, NodePublishVolumeRequest__Output } from './generated/csi/v1/NodePublishVolumeRequest';
export type { NodePublishVolumeResponse__Output as NodePublishVolumeResponse } from './generated/csi/v1/NodePublishVolumeResponse';
export type { NodeUnpublishVolumeRequest, NodeUnpublishVolumeRequest__Output } from './generated/csi/v1/NodeUnpublishVolumeRequest';
export type { NodeUnpublishVolumeResponse__Output as NodeUnpublishVolumeResponse } from './generated/csi/v1/NodeUnpublishVolumeResponse';
export type { NodeGetVolumeStatsRequest, NodeGetVolumeStatsRequest__Output } from './generated/csi/v1/NodeGetVolumeStatsRequest';
export type { NodeGetVolumeStatsResponse__Output as NodeGetVolumeStatsResponse } from './generated/csi/v1/NodeGetVolumeStatsResponse';
export type { NodeExpandVolumeRequest, NodeExpandVolumeRequest__Output } from './generated/csi/v1/NodeExpandVolumeRequest';
export type { NodeExpandVolumeResponse__Output as NodeExpandVolumeResponse } from './generated/csi/v1/NodeExpandVolumeResponse';
export type { NodeGetCapabilitiesRequest, NodeGetCapabilitiesRequest__Output } from './generated/csi/v1/NodeGetCapabilitiesRequest';
export type { NodeGetCapabilitiesResponse__Output as NodeGetCapabilitiesResponse } from './generated/csi/v1/NodeGetCapabilitiesResponse';
export type { NodeGetInfoRequest, NodeGetInfoRequest__Output } from './generated/csi/v1/NodeGetInfoRequest';
export type { NodeGetInfoResponse__Output as NodeGetInfoResponse } from './generated/csi/v1/NodeGetInfoResponse';
export type { VolumeCapability, VolumeCapability__Output } from './generated/csi/v1/VolumeCapability';
export type { CapacityRange, CapacityRange__Output } from './generated/csi/v1/CapacityRange';
export type { Volume, Volume__Output } from './generated/csi/v1/Volume';
export type { Topology, Topology__Output } from './generated/csi/v1/Topology';
export type { TopologyRequirement, TopologyRequirement__Output } from './generated/csi/v1/TopologyRequirement';
export type { VolumeContentSource, VolumeContentSource__Output } from './generated/csi/v1/VolumeContentSource';
export type { Snapshot, Snapshot__Output } from './generated/csi/v1/Snapshot';
export type { VolumeUsage, VolumeUsage__Output } from './generated/csi/v1/VolumeUsage';
export type { VolumeCondition, VolumeCondition__Output } from './generated/csi/v1/VolumeCondition';
export type { PluginCapability, PluginCapability__Output } from './generated/csi/v1/PluginCapability';
export type { NodeServiceCapability, NodeServiceCapability__Output } from './generated/csi/v1/NodeServiceCapability';
export type { ControllerServiceCapability, ControllerServiceCapability__Output } from './generated/csi/v1/ControllerServiceCapability';
export type { ProtoGrpcType as CsiProtoGrpcType } from './generated/csi';
export type { IdentityHandlers, IdentityClient } from './generated/csi/v1/Identity';
export type { ControllerHandlers, ControllerClient } from './generated/csi/v1/Controller';
export type { NodeHandlers, NodeClient } from './generated/csi/v1/Node';

import type { VolumeCapability__Output } from './generated/csi/v1/VolumeCapability';

/** Access mode names (the wire enum, without UNKNOWN). */
export type AccessMode = Exclude<NonNullable<VolumeCapability__Output['accessMode']>['mode'], 'UNKNOWN'>;
export const ACCESS_MODES: readonly AccessMode[] = Object.freeze([
  'SINGLE_NODE_WRITER',
  'SINGLE_NODE_READER_ONLY',
  'MULTI_NODE_READER_ONLY',
  'MULTI_NODE_SINGLE_WRITER',
  'MULTI_NODE_MULTI_WRITER',
  'SINGLE_NODE_SINGLE_WRITER',
  'SINGLE_NODE_MULTI_WRITER',
] as const);
