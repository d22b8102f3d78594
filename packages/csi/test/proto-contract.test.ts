// Pins csi.proto to the CSI v1.9.0 spec: every Identity/Controller/Node
// method, and every field number of its request and response (and of the
// shared messages they carry). Drift from the spec fails here.
import * as path from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import { ValidationError } from '@csiplug/core';
import { UnknownCsiMethodError } from '../src/errors';
import { csiMethodDefinition, csiPackageDefinition, csiProtoPath } from '../src/proto';

type Fields = Record<string, number>;

const SERVICES: Record<string, string[]> = {
  'csi.v1.Identity': ['GetPluginInfo', 'GetPluginCapabilities', 'Probe'],
  'csi.v1.Controller': [
    'CreateVolume',
    'DeleteVolume',
    'ControllerPublishVolume',
    'ControllerUnpublishVolume',
    'ValidateVolumeCapabilities',
    'ListVolumes',
    'GetCapacity',
    'ControllerGetCapabilities',
    'CreateSnapshot',
    'DeleteSnapshot',
    'ListSnapshots',
    'ControllerExpandVolume',
    'ControllerGetVolume',
    'ControllerModifyVolume',
  ],
  'csi.v1.Node': [
    'NodeStageVolume',
    'NodeUnstageVolume',
    'NodePublishVolume',
    'NodeUnpublishVolume',
    'NodeGetVolumeStats',
    'NodeExpandVolume',
    'NodeGetCapabilities',
    'NodeGetInfo',
  ],
};

const MESSAGES: Record<string, Fields> = {
  GetPluginInfoRequest: {},
  GetPluginInfoResponse: { name: 1, vendor_version: 2, manifest: 3 },
  GetPluginCapabilitiesRequest: {},
  GetPluginCapabilitiesResponse: { capabilities: 1 },
  ProbeRequest: {},
  ProbeResponse: { ready: 1 },
  CreateVolumeRequest: {
    name: 1,
    capacity_range: 2,
    volume_capabilities: 3,
    parameters: 4,
    secrets: 5,
    volume_content_source: 6,
    accessibility_requirements: 7,
    mutable_parameters: 8,
  },
  CreateVolumeResponse: { volume: 1 },
  DeleteVolumeRequest: { volume_id: 1, secrets: 2 },
  DeleteVolumeResponse: {},
  ControllerPublishVolumeRequest: { volume_id: 1, node_id: 2, volume_capability: 3, readonly: 4, secrets: 5, volume_context: 6 },
  ControllerPublishVolumeResponse: { publish_context: 1 },
  ControllerUnpublishVolumeRequest: { volume_id: 1, node_id: 2, secrets: 3 },
  ControllerUnpublishVolumeResponse: {},
  ValidateVolumeCapabilitiesRequest: {
    volume_id: 1,
    volume_context: 2,
    volume_capabilities: 3,
    parameters: 4,
    secrets: 5,
    mutable_parameters: 6,
  },
  ValidateVolumeCapabilitiesResponse: { confirmed: 1, message: 2 },
  'ValidateVolumeCapabilitiesResponse.Confirmed': { volume_context: 1, volume_capabilities: 2, parameters: 3, mutable_parameters: 4 },
  ListVolumesRequest: { max_entries: 1, starting_token: 2 },
  ListVolumesResponse: { entries: 1, next_token: 2 },
  'ListVolumesResponse.Entry': { volume: 1, status: 2 },
  'ListVolumesResponse.VolumeStatus': { published_node_ids: 1, volume_condition: 2 },
  GetCapacityRequest: { volume_capabilities: 1, parameters: 2, accessible_topology: 3 },
  GetCapacityResponse: { available_capacity: 1, maximum_volume_size: 2, minimum_volume_size: 3 },
  ControllerGetCapabilitiesRequest: {},
  ControllerGetCapabilitiesResponse: { capabilities: 1 },
  CreateSnapshotRequest: { source_volume_id: 1, name: 2, secrets: 3, parameters: 4 },
  CreateSnapshotResponse: { snapshot: 1 },
  DeleteSnapshotRequest: { snapshot_id: 1, secrets: 2 },
  DeleteSnapshotResponse: {},
  ListSnapshotsRequest: { max_entries: 1, starting_token: 2, source_volume_id: 3, snapshot_id: 4, secrets: 5 },
  ListSnapshotsResponse: { entries: 1, next_token: 2 },
  ControllerExpandVolumeRequest: { volume_id: 1, capacity_range: 2, secrets: 3, volume_capability: 4 },
  ControllerExpandVolumeResponse: { capacity_bytes: 1, node_expansion_required: 2 },
  ControllerGetVolumeRequest: { volume_id: 1 },
  ControllerGetVolumeResponse: { volume: 1, status: 2 },
  ControllerModifyVolumeRequest: { volume_id: 1, secrets: 2, mutable_parameters: 3 },
  ControllerModifyVolumeResponse: {},
  NodeStageVolumeRequest: { volume_id: 1, publish_context: 2, staging_target_path: 3, volume_capability: 4, secrets: 5, volume_context: 6 },
  NodeStageVolumeResponse: {},
  NodeUnstageVolumeRequest: { volume_id: 1, staging_target_path: 2 },
  NodeUnstageVolumeResponse: {},
  NodePublishVolumeRequest: {
    volume_id: 1,
    publish_context: 2,
    staging_target_path: 3,
    target_path: 4,
    volume_capability: 5,
    readonly: 6,
    secrets: 7,
    volume_context: 8,
  },
  NodePublishVolumeResponse: {},
  NodeUnpublishVolumeRequest: { volume_id: 1, target_path: 2 },
  NodeUnpublishVolumeResponse: {},
  NodeGetVolumeStatsRequest: { volume_id: 1, volume_path: 2, staging_target_path: 3 },
  NodeGetVolumeStatsResponse: { usage: 1, volume_condition: 2 },
  NodeExpandVolumeRequest: { volume_id: 1, volume_path: 2, capacity_range: 3, staging_target_path: 4, volume_capability: 5, secrets: 6 },
  NodeExpandVolumeResponse: { capacity_bytes: 1 },
  NodeGetCapabilitiesRequest: {},
  NodeGetCapabilitiesResponse: { capabilities: 1 },
  NodeGetInfoRequest: {},
  NodeGetInfoResponse: { node_id: 1, max_volumes_per_node: 2, accessible_topology: 3 },
  // Messages carried inside the above.
  PluginCapability: { service: 1, volume_expansion: 2 },
  VolumeCapability: { block: 1, mount: 2, access_mode: 3 },
  'VolumeCapability.MountVolume': { fs_type: 1, mount_flags: 2, volume_mount_group: 3 },
  'VolumeCapability.AccessMode': { mode: 1 },
  CapacityRange: { required_bytes: 1, limit_bytes: 2 },
  Volume: { capacity_bytes: 1, volume_id: 2, volume_context: 3, content_source: 4, accessible_topology: 5 },
  VolumeContentSource: { snapshot: 1, volume: 2 },
  TopologyRequirement: { requisite: 1, preferred: 2 },
  Topology: { segments: 1 },
  Snapshot: { size_bytes: 1, snapshot_id: 2, source_volume_id: 3, creation_time: 4, ready_to_use: 5, group_snapshot_id: 6 },
  VolumeUsage: { available: 1, total: 2, used: 3, unit: 4 },
  VolumeCondition: { abnormal: 1, message: 2 },
  ControllerServiceCapability: { rpc: 1 },
  NodeServiceCapability: { rpc: 1 },
};

const ENUMS: Record<string, Record<string, number>> = {
  'PluginCapability.Service.Type': { UNKNOWN: 0, CONTROLLER_SERVICE: 1, VOLUME_ACCESSIBILITY_CONSTRAINTS: 2, GROUP_CONTROLLER_SERVICE: 3 },
  'PluginCapability.VolumeExpansion.Type': { UNKNOWN: 0, ONLINE: 1, OFFLINE: 2 },
  'VolumeCapability.AccessMode.Mode': {
    UNKNOWN: 0,
    SINGLE_NODE_WRITER: 1,
    SINGLE_NODE_READER_ONLY: 2,
    MULTI_NODE_READER_ONLY: 3,
    MULTI_NODE_SINGLE_WRITER: 4,
    MULTI_NODE_MULTI_WRITER: 5,
    SINGLE_NODE_SINGLE_WRITER: 6,
    SINGLE_NODE_MULTI_WRITER: 7,
  },
  'ControllerServiceCapability.RPC.Type': {
    UNKNOWN: 0,
    CREATE_DELETE_VOLUME: 1,
    PUBLISH_UNPUBLISH_VOLUME: 2,
    LIST_VOLUMES: 3,
    GET_CAPACITY: 4,
    CREATE_DELETE_SNAPSHOT: 5,
    LIST_SNAPSHOTS: 6,
    CLONE_VOLUME: 7,
    PUBLISH_READONLY: 8,
    EXPAND_VOLUME: 9,
    LIST_VOLUMES_PUBLISHED_NODES: 10,
    VOLUME_CONDITION: 11,
    GET_VOLUME: 12,
    SINGLE_NODE_MULTI_WRITER: 13,
    MODIFY_VOLUME: 14,
  },
  'NodeServiceCapability.RPC.Type': {
    UNKNOWN: 0,
    STAGE_UNSTAGE_VOLUME: 1,
    GET_VOLUME_STATS: 2,
    EXPAND_VOLUME: 3,
    VOLUME_CONDITION: 4,
    SINGLE_NODE_MULTI_WRITER: 5,
    VOLUME_MOUNT_GROUP: 6,
  },
  'VolumeUsage.Unit': { UNKNOWN: 0, BYTES: 1, INODES: 2 },
};

interface FieldDescriptor {
  name: string;
  number: number;
}

// keepCase here so the spec's snake_case names are compared exactly.
const file = csiProtoPath();
const exact = protoLoader.loadSync(path.basename(file), { keepCase: true, includeDirs: [path.dirname(file)] });

interface DescriptorProto {
  name: string;
  field: FieldDescriptor[];
  nestedType: DescriptorProto[];
  enumType: Array<{ name: string; value: FieldDescriptor[] }>;
}

// proto-loader lists top-level messages; nested ones are found in their parent's descriptor.
function descriptorOf(dotted: string): DescriptorProto {
  const [top, ...rest] = dotted.split('.');
  const def = exact[`csi.v1.${top}`] as protoLoader.MessageTypeDefinition<object, object> | undefined;
  if (!def) throw new Error(`csi.proto has no message csi.v1.${top}`);
  let d = def.type as unknown as DescriptorProto;
  for (const name of rest) {
    const next = d.nestedType.find((n) => n.name === name);
    if (!next) throw new Error(`csi.proto has no message csi.v1.${dotted}`);
    d = next;
  }
  return d;
}

function fieldsOf(message: string): Fields {
  const out: Fields = {};
  for (const f of descriptorOf(message).field) out[f.name] = f.number;
  return out;
}

function enumValuesOf(dotted: string): Record<string, number> {
  const parts = dotted.split('.');
  const name = parts.pop()!;
  const e = descriptorOf(parts.join('.')).enumType.find((x) => x.name === name);
  if (!e) throw new Error(`csi.proto has no enum csi.v1.${dotted}`);
  const out: Record<string, number> = {};
  for (const v of e.value) out[v.name] = v.number;
  return out;
}

describe('csi.proto matches the CSI v1.9.0 spec', () => {
  it('is package csi.v1 with the three services and exactly their methods', () => {
    for (const [service, methods] of Object.entries(SERVICES)) {
      const def = exact[service] as protoLoader.ServiceDefinition;
      expect(def).toBeDefined();
      expect(Object.keys(def).sort()).toEqual([...methods].sort());
      for (const m of methods) {
        expect(def[m].path).toBe(`/${service}/${m}`);
        expect(def[m].requestStream || def[m].responseStream).toBe(false);
      }
    }
  });

  it('pairs every method with its Request/Response messages', () => {
    for (const [service, methods] of Object.entries(SERVICES)) {
      for (const m of methods) {
        const def = (exact[service] as protoLoader.ServiceDefinition)[m];
        expect((def.requestType.type as { name: string }).name).toBe(`${m}Request`);
        expect((def.responseType.type as { name: string }).name).toBe(`${m}Response`);
      }
    }
  });

  it.each(Object.entries(MESSAGES))('%s has the spec field names and numbers', (message, fields) => {
    expect(fieldsOf(message)).toEqual(fields);
  });

  it.each(Object.entries(ENUMS))('enum %s has the spec values', (name, values) => {
    const got = enumValuesOf(name);
    expect(got).toEqual(values);
  });

  it('serves the same contract through the shared loader options', () => {
    const def = csiPackageDefinition();
    for (const service of Object.keys(SERVICES)) expect(Object.keys(def[service] as object).sort()).toEqual([...SERVICES[service]].sort());
  });

  it('finds a method of a service, and refuses one the service does not have with an UnknownCsiMethodError (EINVALID)', () => {
    expect(csiMethodDefinition('node', 'NodeStageVolume').path).toBe('/csi.v1.Node/NodeStageVolume');
    let err: unknown;
    try {
      csiMethodDefinition('node', 'CreateVolume');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UnknownCsiMethodError);
    expect(err).toBeInstanceOf(ValidationError);
    expect(err).toMatchObject({ code: 'EINVALID', field: 'rpc', service: 'csi.v1.Node', rpc: 'CreateVolume' });
    expect((err as Error).message).toBe('CSI csi.v1.Node has no method "CreateVolume"; see csi.proto for the RPCs of each service');
  });
});
