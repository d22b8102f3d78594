// The volume area on Nomad's wire (api/csi.go): a volume as CSIVolume and
// CSIVolumeListStub, a plugin's own volumes as CSIVolumeExternalStub, its
// snapshots as CSISnapshot, and the register/create request body
// (CSIVolumeRegisterRequest's CSIVolume) both ways with csiplug's volume
// spec document. Pure: the routes encode with it, the API client decodes.
// csiplug's own data (claim details, this node's mounts, a node-side
// expansion) rides in `Csiplug`. Every volume answer is sanitized as Nomad's
// CSIVolume.Sanitize does it: Secrets null, mount flags "[REDACTED]".
import { parseSize, type VolumeSpecDocument } from '@csiplug/jobspec';
import { ApiError } from '../api-error';
import type { ExternalVolumeView, NodeExpandOutcome, SnapshotView, VolumeClaimView, VolumeMountView, VolumeView } from '../service';
import type { NomadAllocationListStub } from './alloc-wire';
import { msToUnixNano, unixNanoToMs } from './nomad-time';

/** csiplug has one namespace; Nomad's tools send and read "default". */
export const NOMAD_NAMESPACE = 'default';

/** What Nomad's CSIVolume.Sanitize sends in place of mount flags (they can carry credentials). */
export const REDACTED = '[REDACTED]';

/**
 * An int64 as JSON a Go client reads: a count past 2^53−1 (a plugin answering
 * MaxInt64) would print as 9223372036854776000, which Go's int64 refuses,
 * failing the whole answer; it goes as 2^53−1.
 */
export function int64Out(n: number): number {
  return Number.isSafeInteger(n) ? n : n > 0 ? Number.MAX_SAFE_INTEGER : n < 0 ? Number.MIN_SAFE_INTEGER : 0;
}

/** Mount flags as Nomad's CSIMountOptions.Sanitize answers them: any flags → one "[REDACTED]". */
function sanitizedFlags(flags: readonly string[]): string[] {
  return flags.length > 0 ? [REDACTED] : [];
}

/** api.CSITopology */
export interface NomadCSITopology {
  Segments: Record<string, string>;
}

/** api.CSITopologyRequest */
export interface NomadCSITopologyRequest {
  Required?: NomadCSITopology[] | null;
  Preferred?: NomadCSITopology[] | null;
}

/** api.CSIMountOptions */
export interface NomadCSIMountOptions {
  FSType?: string;
  MountFlags?: string[] | null;
}

/** api.CSIVolumeCapability */
export interface NomadCSIVolumeCapability {
  AccessMode: string;
  AttachmentMode: string;
}

/** api.AllocationListStub of a claiming alloc this node no longer has: its ID and node alone. */
export interface NomadVolumeAllocationStub {
  ID: string;
  Namespace: string;
  NodeID: string;
}

/** A claim's details Nomad has no field for (the claim's mode is in ReadAllocs/WriteAllocs). */
export interface CsiplugClaimDetails {
  allocId: string;
  accessMode: string;
  attachmentMode: string;
  /** ms since the epoch */
  since: number;
}

/** What csiplug adds to a CSIVolume. */
export interface CsiplugVolumeExtras {
  /** Every claim, in the catalog's order. */
  claims: CsiplugClaimDetails[];
  publishContexts?: Record<string, Record<string, string>>;
  /** This node's mounts of the volume. */
  mounts?: VolumeMountView[];
  nodeExpansion?: NodeExpandOutcome[];
}

/** api.CSIVolume (the fields csiplug knows; Go reads an absent one as its zero value). */
export interface NomadCSIVolume {
  ID: string;
  Name?: string;
  ExternalID?: string;
  Namespace?: string;
  RequestedTopologies?: NomadCSITopologyRequest | null;
  Topologies?: NomadCSITopology[] | null;
  AccessMode?: string;
  AttachmentMode?: string;
  MountOptions?: NomadCSIMountOptions | null;
  Secrets?: Record<string, string> | null;
  Parameters?: Record<string, string> | null;
  Context?: Record<string, string> | null;
  Capacity?: number;
  RequestedCapacityMin?: number;
  RequestedCapacityMax?: number;
  RequestedCapabilities?: NomadCSIVolumeCapability[] | null;
  CloneID?: string;
  SnapshotID?: string;
  /** Alloc id → null, as Nomad sends them. */
  ReadAllocs?: Record<string, null> | null;
  WriteAllocs?: Record<string, null> | null;
  Allocations?: Array<NomadAllocationListStub | NomadVolumeAllocationStub> | null;
  Schedulable?: boolean;
  PluginID: string;
  Provider?: string;
  ProviderVersion?: string;
  ControllerRequired?: boolean;
  ControllersHealthy?: number;
  ControllersExpected?: number;
  NodesHealthy?: number;
  NodesExpected?: number;
  /** Unix nanoseconds */
  CreateTime?: number;
  Csiplug?: CsiplugVolumeExtras;
}

/** api.CSIVolumeListStub */
export interface NomadCSIVolumeListStub {
  ID: string;
  Namespace: string;
  Name: string;
  ExternalID: string;
  Topologies?: NomadCSITopology[] | null;
  AccessMode: string;
  AttachmentMode: string;
  CurrentReaders: number;
  CurrentWriters: number;
  Schedulable: boolean;
  PluginID: string;
  Provider?: string;
  ControllerRequired?: boolean;
  ControllersHealthy?: number;
  ControllersExpected?: number;
  NodesHealthy?: number;
  NodesExpected?: number;
  CreateTime: number;
  Csiplug?: CsiplugVolumeStubExtras;
}

/**
 * What csiplug adds to a CSIVolumeListStub: the rest of the volume as csiplug's
 * list views read it (one request serves `volume status` and the status page),
 * mount flags sanitized; never its secrets.
 */
export type CsiplugVolumeStubExtras = Omit<
  VolumeView,
  'id' | 'name' | 'type' | 'pluginId' | 'externalId' | 'accessibleTopology' | 'schedulable' | 'createdAt' | 'secrets'
>;

/** api.CSIVolumeRegisterRequest and api.CSIVolumeCreateRequest (csiplug reads Volumes; PolicyOverride has no meaning here). */
export interface NomadCSIVolumeWriteRequest {
  Volumes: NomadCSIVolume[];
}

/** api.CSIVolumeRegisterResponse and api.CSIVolumeCreateResponse. */
export interface NomadCSIVolumeWriteResponse {
  Volumes: NomadCSIVolume[];
  Warnings: string;
}

/** api.CSIVolumeExternalStub */
export interface NomadCSIVolumeExternalStub {
  ExternalID: string;
  CapacityBytes?: number;
  PublishedExternalNodeIDs?: string[];
  IsAbnormal?: boolean;
  Status?: string;
  Csiplug: { pluginId: string; accessibleTopology?: { segments: Record<string, string> }[]; volumeId?: string };
}

/** api.CSIVolumeListExternalResponse */
export interface NomadCSIVolumeListExternalResponse {
  Volumes: NomadCSIVolumeExternalStub[];
  NextToken: string;
}

/** api.CSISnapshot (as answered: Name, Secrets and Parameters are only sent in a create). */
export interface NomadCSISnapshot {
  ID: string;
  ExternalSourceVolumeID: string;
  SizeBytes: number;
  /** Unix seconds, as the storage provider gave it (0: it did not say). */
  CreateTime: number;
  IsReady: boolean;
  SourceVolumeID: string;
  PluginID: string;
}

/** api.CSISnapshotListResponse */
export interface NomadCSISnapshotListResponse {
  Snapshots: NomadCSISnapshot[];
  NextToken: string;
}

/** api.CSISnapshotCreateResponse */
export interface NomadCSISnapshotCreateResponse {
  Snapshots: NomadCSISnapshot[];
}

/** The plugin's health as a CSIVolume carries it (the plugin view's counts, the cluster's when in a cluster). */
export interface VolumePluginHealth {
  provider?: string;
  version?: string;
  controllerRequired: boolean;
  controllersHealthy: number;
  controllersExpected: number;
  nodesHealthy: number;
  nodesExpected: number;
}

/** What encoding a volume needs besides the volume: this node (every claim of the catalog is on it), its plugin, its claiming allocs. */
export interface VolumeWireContext {
  nodeId: string;
  plugin?: VolumePluginHealth;
  /** The claiming alloc as Nomad's AllocationListStub (alloc-wire.ts encodeAllocStub); undefined when this node no longer has it. */
  allocOf(id: string): NomadAllocationListStub | undefined;
}

function topologiesOut(list: { segments: Record<string, string> }[]): NomadCSITopology[] {
  return list.map((t) => ({ Segments: { ...t.segments } }));
}

function topologiesIn(list: NomadCSITopology[] | null | undefined): { segments: Record<string, string> }[] | undefined {
  return list ? list.map((t) => ({ segments: { ...(t.Segments ?? {}) } })) : undefined;
}

function pluginFields(plugin: VolumePluginHealth | undefined): Partial<NomadCSIVolume> {
  if (!plugin) return {};
  return {
    ...(plugin.provider !== undefined ? { Provider: plugin.provider } : {}),
    ...(plugin.version !== undefined ? { ProviderVersion: plugin.version } : {}),
    ControllerRequired: plugin.controllerRequired,
    ControllersHealthy: plugin.controllersHealthy,
    ControllersExpected: plugin.controllersExpected,
    NodesHealthy: plugin.nodesHealthy,
    NodesExpected: plugin.nodesExpected,
  };
}

function allocsOfMode(claims: VolumeClaimView[], mode: 'read' | 'write'): Record<string, null> {
  return Object.fromEntries(claims.filter((c) => c.mode === mode).map((c) => [c.allocId, null]));
}

/** A volume as Nomad's CSIVolume, sanitized as Nomad's CSIVolume.Sanitize: Secrets null, mount flags "[REDACTED]". */
export function encodeVolume(view: VolumeView, ctx: VolumeWireContext): NomadCSIVolume {
  const first = view.claims[0];
  const extras: CsiplugVolumeExtras = {
    claims: view.claims.map((c) => ({ allocId: c.allocId, accessMode: c.accessMode, attachmentMode: c.attachmentMode, since: c.since })),
    ...(view.publishContexts !== undefined ? { publishContexts: view.publishContexts } : {}),
    ...(view.mounts !== undefined ? { mounts: view.mounts } : {}),
    ...(view.nodeExpansion !== undefined ? { nodeExpansion: view.nodeExpansion } : {}),
  };
  return {
    ...encodeVolumeSpecFields(view),
    Namespace: NOMAD_NAMESPACE,
    ExternalID: view.externalId,
    ...(view.accessibleTopology !== undefined ? { Topologies: topologiesOut(view.accessibleTopology) } : {}),
    ...(first ? { AccessMode: first.accessMode, AttachmentMode: first.attachmentMode } : {}),
    ...(view.capacityBytes !== undefined ? { Capacity: int64Out(view.capacityBytes) } : {}),
    ReadAllocs: allocsOfMode(view.claims, 'read'),
    WriteAllocs: allocsOfMode(view.claims, 'write'),
    // An alloc this node no longer has: its ID and node alone.
    Allocations: view.claims.map((c) => ctx.allocOf(c.allocId) ?? { ID: c.allocId, Namespace: NOMAD_NAMESPACE, NodeID: ctx.nodeId }),
    Schedulable: view.schedulable,
    ...pluginFields(ctx.plugin),
    CreateTime: msToUnixNano(view.createdAt),
    Csiplug: extras,
  };
}

/** A volume as Nomad's CSIVolumeListStub. */
export function encodeVolumeStub(view: VolumeView, ctx: Pick<VolumeWireContext, 'plugin'>): NomadCSIVolumeListStub {
  const first = view.claims[0];
  const { Provider, ControllerRequired, ControllersHealthy, ControllersExpected, NodesHealthy, NodesExpected } = pluginFields(ctx.plugin);
  return {
    ID: view.id,
    Namespace: NOMAD_NAMESPACE,
    Name: view.name,
    ExternalID: view.externalId,
    ...(view.accessibleTopology !== undefined ? { Topologies: topologiesOut(view.accessibleTopology) } : {}),
    AccessMode: first?.accessMode ?? '',
    AttachmentMode: first?.attachmentMode ?? '',
    CurrentReaders: view.claims.filter((c) => c.mode === 'read').length,
    CurrentWriters: view.claims.filter((c) => c.mode === 'write').length,
    Schedulable: view.schedulable,
    PluginID: view.pluginId,
    ...(ctx.plugin ? { Provider, ControllerRequired, ControllersHealthy, ControllersExpected, NodesHealthy, NodesExpected } : {}),
    CreateTime: msToUnixNano(view.createdAt),
    Csiplug: stubExtras(view),
  };
}

function stubExtras(view: VolumeView): CsiplugVolumeStubExtras {
  const { id, name, type, pluginId, externalId, accessibleTopology, schedulable, createdAt, secrets, ...rest } = view;
  void [id, name, type, pluginId, externalId, accessibleTopology, schedulable, createdAt, secrets];
  return structuredClone({
    ...rest,
    ...(view.mountOptions?.mountFlags !== undefined
      ? { mountOptions: { ...view.mountOptions, mountFlags: sanitizedFlags(view.mountOptions.mountFlags) } }
      : {}),
  });
}

/** A CSIVolumeListStub back to csiplug's view: Nomad's fields and `Csiplug` (a stub from a Nomad server, without it, gives no capabilities or claim details). */
export function decodeVolumeStub(wire: NomadCSIVolumeListStub): VolumeView {
  const accessibleTopology = topologiesIn(wire.Topologies);
  return {
    capabilities: [],
    parameters: {},
    context: {},
    claims: [],
    ...structuredClone(wire.Csiplug ?? {}),
    id: wire.ID,
    name: wire.Name || wire.ID,
    type: 'csi',
    pluginId: wire.PluginID,
    externalId: wire.ExternalID ?? '',
    ...(accessibleTopology !== undefined ? { accessibleTopology } : {}),
    schedulable: wire.Schedulable ?? false,
    secrets: {},
    createdAt: unixNanoToMs(wire.CreateTime ?? 0),
  };
}

/** Nomad's CSIVolume back to csiplug's view (a volume from a Nomad server, without `Csiplug`, gets its claims from ReadAllocs/WriteAllocs). */
export function decodeVolume(wire: NomadCSIVolume): VolumeView {
  const writers = new Set(Object.keys(wire.WriteAllocs ?? {}));
  const details: CsiplugClaimDetails[] =
    wire.Csiplug?.claims ??
    [...Object.keys(wire.ReadAllocs ?? {}), ...writers].map((allocId) => ({
      allocId,
      accessMode: wire.AccessMode ?? '',
      attachmentMode: wire.AttachmentMode ?? '',
      since: 0,
    }));
  const spec = decodeVolumeSpecFields(wire);
  const accessibleTopology = topologiesIn(wire.Topologies);
  return {
    ...spec,
    externalId: wire.ExternalID ?? '',
    ...(wire.Capacity ? { capacityBytes: wire.Capacity } : {}),
    ...(accessibleTopology !== undefined ? { accessibleTopology } : {}),
    schedulable: wire.Schedulable ?? false,
    claims: details.map((c) => ({
      allocId: c.allocId,
      mode: writers.has(c.allocId) ? 'write' : 'read',
      accessMode: c.accessMode,
      attachmentMode: c.attachmentMode,
      since: c.since,
    })),
    ...(wire.Csiplug?.publishContexts !== undefined ? { publishContexts: wire.Csiplug.publishContexts } : {}),
    createdAt: unixNanoToMs(wire.CreateTime ?? 0),
    ...(wire.Csiplug?.mounts !== undefined ? { mounts: wire.Csiplug.mounts } : {}),
    ...(wire.Csiplug?.nodeExpansion !== undefined ? { nodeExpansion: wire.Csiplug.nodeExpansion } : {}),
  };
}

/** The spec part of a volume as an answer's CSIVolume fields (sanitized). */
function encodeVolumeSpecFields(spec: VolumeView): NomadCSIVolume {
  const tr = spec.topologyRequest;
  return {
    ID: spec.id,
    Name: spec.name,
    PluginID: spec.pluginId,
    ...(spec.externalId !== undefined ? { ExternalID: spec.externalId } : {}),
    RequestedCapabilities: spec.capabilities.map((c) => ({ AccessMode: c.accessMode, AttachmentMode: c.attachmentMode })),
    ...(spec.mountOptions
      ? {
          MountOptions: {
            ...(spec.mountOptions.fsType !== undefined ? { FSType: spec.mountOptions.fsType } : {}),
            ...(spec.mountOptions.mountFlags !== undefined ? { MountFlags: sanitizedFlags(spec.mountOptions.mountFlags) } : {}),
          },
        }
      : {}),
    ...(spec.capacityMin !== undefined ? { RequestedCapacityMin: int64Out(spec.capacityMin) } : {}),
    ...(spec.capacityMax !== undefined ? { RequestedCapacityMax: int64Out(spec.capacityMax) } : {}),
    // Nomad's Sanitize: "would be better not to have at all but left in and redacted".
    Secrets: null,
    Parameters: { ...spec.parameters },
    Context: { ...spec.context },
    ...(spec.snapshotId !== undefined ? { SnapshotID: spec.snapshotId } : {}),
    ...(spec.cloneId !== undefined ? { CloneID: spec.cloneId } : {}),
    ...(tr
      ? {
          RequestedTopologies: {
            ...(tr.required ? { Required: topologiesOut(tr.required) } : {}),
            ...(tr.preferred ? { Preferred: topologiesOut(tr.preferred) } : {}),
          },
        }
      : {}),
  };
}

function decodeVolumeSpecFields(wire: NomadCSIVolume): Omit<VolumeView, 'externalId' | 'schedulable' | 'claims' | 'createdAt'> {
  const mo = wire.MountOptions;
  const tr = wire.RequestedTopologies;
  const required = topologiesIn(tr?.Required);
  const preferred = topologiesIn(tr?.Preferred);
  return {
    id: wire.ID,
    name: wire.Name || wire.ID,
    type: 'csi',
    pluginId: wire.PluginID,
    capabilities: (wire.RequestedCapabilities ?? []).map((c) => ({
      accessMode: c.AccessMode as VolumeView['capabilities'][number]['accessMode'],
      attachmentMode: c.AttachmentMode as VolumeView['capabilities'][number]['attachmentMode'],
    })),
    ...(mo
      ? {
          mountOptions: {
            ...(mo.FSType ? { fsType: mo.FSType } : {}),
            ...(mo.MountFlags ? { mountFlags: [...mo.MountFlags] } : {}),
          },
        }
      : {}),
    ...(wire.RequestedCapacityMin ? { capacityMin: wire.RequestedCapacityMin } : {}),
    ...(wire.RequestedCapacityMax ? { capacityMax: wire.RequestedCapacityMax } : {}),
    parameters: { ...(wire.Parameters ?? {}) },
    secrets: { ...(wire.Secrets ?? {}) },
    context: { ...(wire.Context ?? {}) },
    ...(wire.SnapshotID ? { snapshotId: wire.SnapshotID } : {}),
    ...(wire.CloneID ? { cloneId: wire.CloneID } : {}),
    ...(tr && (required || preferred)
      ? { topologyRequest: { ...(required ? { required } : {}), ...(preferred ? { preferred } : {}) } }
      : {}),
  };
}

// ---- The register/create body: Nomad's CSIVolume ↔ csiplug's volume spec document.

/** csiplug's volume spec document as the CSIVolume of a register or create request (what the API client sends). */
export function volumeDocumentToNomad(doc: VolumeSpecDocument): NomadCSIVolume {
  const capabilities = Array.isArray(doc.capability) ? doc.capability : doc.capability ? [doc.capability] : [];
  const size = (v: string | number | undefined, where: string): number | undefined => (v === undefined ? undefined : parseSize(v, where));
  const min = size(doc.capacity_min, 'capacity_min');
  const max = size(doc.capacity_max, 'capacity_max');
  const tr = doc.topology_request;
  const mo = doc.mount_options;
  return {
    ID: doc.id,
    ...(doc.name !== undefined ? { Name: doc.name } : {}),
    Namespace: NOMAD_NAMESPACE,
    PluginID: doc.plugin_id,
    ...(doc.external_id !== undefined ? { ExternalID: doc.external_id } : {}),
    RequestedCapabilities: capabilities.map((c) => ({ AccessMode: c.access_mode, AttachmentMode: c.attachment_mode })),
    ...(mo
      ? {
          MountOptions: {
            ...(mo.fs_type !== undefined ? { FSType: mo.fs_type } : {}),
            ...(mo.mount_flags !== undefined ? { MountFlags: [...mo.mount_flags] } : {}),
          },
        }
      : {}),
    ...(min !== undefined ? { RequestedCapacityMin: min } : {}),
    ...(max !== undefined ? { RequestedCapacityMax: max } : {}),
    ...(doc.secrets !== undefined ? { Secrets: { ...doc.secrets } } : {}),
    ...(doc.parameters !== undefined ? { Parameters: { ...doc.parameters } } : {}),
    ...(doc.context !== undefined ? { Context: { ...doc.context } } : {}),
    ...(doc.snapshot_id !== undefined ? { SnapshotID: doc.snapshot_id } : {}),
    ...(doc.clone_id !== undefined ? { CloneID: doc.clone_id } : {}),
    ...(tr
      ? {
          RequestedTopologies: {
            ...(tr.required ? { Required: tr.required.topology.map((t) => ({ Segments: { ...t.segments } })) } : {}),
            ...(tr.preferred ? { Preferred: tr.preferred.topology.map((t) => ({ Segments: { ...t.segments } })) } : {}),
          },
        }
      : {}),
  };
}

const ACCEPTED_NAMESPACES = new Set(['', NOMAD_NAMESPACE]);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Reads one CSIVolume of a request, each refusal naming the field as Nomad's body spells it (e.g. `Volumes[0].RequestedCapabilities[1].AccessMode`). */
class NomadVolumeReader {
  constructor(
    private readonly body: Record<string, unknown>,
    private readonly where: string,
  ) {}

  fail(field: string, what: string): never {
    throw ApiError.badRequest(`${this.where}.${field} ${what}`);
  }

  /** A string field; "" and null read as absent, as Go's zero value. */
  string(field: string, body: Record<string, unknown> = this.body, path = field): string | undefined {
    const v = body[field];
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') this.fail(path, `must be a string (got ${JSON.stringify(v)})`);
    return v;
  }

  stringMap(field: string): Record<string, string> | undefined {
    const v = this.body[field];
    if (v === undefined || v === null) return undefined;
    if (!isObject(v) || Object.values(v).some((x) => typeof x !== 'string'))
      this.fail(field, 'must be an object of string values, e.g. { "key": "value" }');
    return { ...(v as Record<string, string>) };
  }

  /** A byte count; 0 and null read as absent. */
  bytes(field: string): number | undefined {
    const v = this.body[field];
    if (v === undefined || v === null || v === 0) return undefined;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
      this.fail(field, `must be a whole number of bytes (got ${JSON.stringify(v)})`);
    return v;
  }

  list(field: string): unknown[] | undefined {
    const v = this.body[field];
    if (v === undefined || v === null) return undefined;
    if (!Array.isArray(v)) this.fail(field, 'must be a list');
    return v;
  }

  topologies(value: unknown, path: string): Array<{ segments: Record<string, string> }> {
    if (!Array.isArray(value)) this.fail(path, 'must be a list of { "Segments": { … } }');
    return value.map((t, i) => {
      const segments = isObject(t) ? t['Segments'] : undefined;
      if (!isObject(segments) || Object.values(segments).some((x) => typeof x !== 'string'))
        this.fail(`${path}[${i}].Segments`, 'must be an object of string values, e.g. { "rack": "r1" }');
      return { segments: { ...(segments as Record<string, string>) } };
    });
  }
}

/**
 * One CSIVolume of a register or create request as csiplug's volume spec
 * document, for validateVolumeSpec. Fields Nomad only answers with
 * (Allocations, Schedulable, the plugin's counts, indexes, times) are
 * ignored as Nomad's server ignores them; the old top-level AccessMode and
 * AttachmentMode stand for one capability when RequestedCapabilities is empty,
 * as Nomad reads them.
 */
export function nomadVolumeToDocument(raw: unknown, where: string): VolumeSpecDocument {
  if (!isObject(raw)) throw ApiError.badRequest(`${where} must be a CSIVolume object like { "ID": "…", "PluginID": "…", … }`);
  const r: NomadVolumeReader = new NomadVolumeReader(raw, where);
  const namespace = r.string('Namespace');
  if (namespace !== undefined && !ACCEPTED_NAMESPACES.has(namespace))
    r.fail('Namespace', `"${namespace}" is not known: csiplug has one namespace, "default"`);
  const id = r.string('ID');
  if (id === undefined) r.fail('ID', 'is required: the volume id');
  const pluginId = r.string('PluginID');
  if (pluginId === undefined) r.fail('PluginID', 'is required: the id of the plugin that serves the volume');

  let capabilities = (r.list('RequestedCapabilities') ?? []).map((c, i) => {
    if (!isObject(c)) r.fail(`RequestedCapabilities[${i}]`, 'must be an object like { "AccessMode": "…", "AttachmentMode": "…" }');
    const accessMode = r.string('AccessMode', c, `RequestedCapabilities[${i}].AccessMode`);
    if (accessMode === undefined) r.fail(`RequestedCapabilities[${i}].AccessMode`, 'is required, e.g. "single-node-writer"');
    const attachmentMode = r.string('AttachmentMode', c, `RequestedCapabilities[${i}].AttachmentMode`) ?? 'file-system';
    return { access_mode: accessMode, attachment_mode: attachmentMode };
  });
  const legacyAccess = r.string('AccessMode');
  if (capabilities.length === 0 && legacyAccess !== undefined)
    capabilities = [{ access_mode: legacyAccess, attachment_mode: r.string('AttachmentMode') ?? 'file-system' }];
  if (capabilities.length === 0)
    r.fail('RequestedCapabilities', 'is required: give at least one { "AccessMode": "…", "AttachmentMode": "…" }');

  const doc: VolumeSpecDocument = { id, type: 'csi', plugin_id: pluginId, capability: capabilities };
  const name = r.string('Name');
  if (name !== undefined) doc.name = name;
  const externalId = r.string('ExternalID');
  if (externalId !== undefined) doc.external_id = externalId;

  const mo = raw['MountOptions'];
  if (mo !== undefined && mo !== null) {
    if (!isObject(mo)) r.fail('MountOptions', 'must be an object like { "FSType": "ext4", "MountFlags": ["noatime"] }');
    const fsType = r.string('FSType', mo, 'MountOptions.FSType');
    const flags = mo['MountFlags'];
    if (flags !== undefined && flags !== null && (!Array.isArray(flags) || flags.some((f) => typeof f !== 'string')))
      r.fail('MountOptions.MountFlags', 'must be a list of strings');
    const redactedFlag = Array.isArray(flags) ? flags.indexOf(REDACTED) : -1;
    if (redactedFlag >= 0)
      r.fail(
        `MountOptions.MountFlags[${redactedFlag}]`,
        `is "${REDACTED}", what csiplug answers in place of the flags, not a flag: send the real mount flags (a register replaces the volume's mount options with the ones it sends)`,
      );
    // Go sends an empty MountOptions when none were given; it means none.
    if (fsType !== undefined || (Array.isArray(flags) && flags.length > 0))
      doc.mount_options = {
        ...(fsType !== undefined ? { fs_type: fsType } : {}),
        ...(Array.isArray(flags) ? { mount_flags: [...(flags as string[])] } : {}),
      };
  }

  const min = r.bytes('RequestedCapacityMin');
  const max = r.bytes('RequestedCapacityMax');
  if (min !== undefined) doc.capacity_min = min;
  if (max !== undefined) doc.capacity_max = max;
  for (const [field, key] of [
    ['Secrets', 'secrets'],
    ['Parameters', 'parameters'],
    ['Context', 'context'],
  ] as const) {
    const map = r.stringMap(field);
    const redactedKey = field === 'Secrets' ? Object.keys(map ?? {}).find((k) => map![k] === REDACTED) : undefined;
    if (redactedKey !== undefined)
      r.fail(
        `Secrets.${redactedKey}`,
        `is "${REDACTED}", a placeholder, not the secret: send the real value (a register replaces the volume's secrets with the ones it sends; leave Secrets out only to keep none)`,
      );
    if (map !== undefined) doc[key] = map;
  }
  const snapshotId = r.string('SnapshotID');
  const cloneId = r.string('CloneID');
  if (snapshotId !== undefined) doc.snapshot_id = snapshotId;
  if (cloneId !== undefined) doc.clone_id = cloneId;

  const tr = raw['RequestedTopologies'];
  if (tr !== undefined && tr !== null) {
    if (!isObject(tr)) r.fail('RequestedTopologies', 'must be an object like { "Required": [{ "Segments": { … } }] }');
    const request: NonNullable<VolumeSpecDocument['topology_request']> = {};
    for (const [field, key] of [
      ['Required', 'required'],
      ['Preferred', 'preferred'],
    ] as const) {
      const list = tr[field];
      if (list === undefined || list === null) continue;
      const topology = r.topologies(list, `RequestedTopologies.${field}`);
      if (topology.length > 0) request[key] = { topology };
    }
    if (request.required || request.preferred) doc.topology_request = request;
  }
  return doc;
}

/** The one CSIVolume of a register or create request whose path names `pathId`: Nomad's body `{ "Volumes": [ … ] }`. */
export function requestedVolumeDocument(body: unknown, pathId: string): VolumeSpecDocument {
  const volumes = isObject(body) ? body['Volumes'] : undefined;
  if (!Array.isArray(volumes))
    throw ApiError.badRequest('the body must be a CSIVolumeRegisterRequest like { "Volumes": [{ "ID": "…", "PluginID": "…", … }] }');
  if (volumes.length !== 1)
    throw ApiError.badRequest(`Volumes must hold exactly one volume, the one the path names ("${pathId}"); got ${volumes.length}`);
  const doc = nomadVolumeToDocument(volumes[0], 'Volumes[0]');
  if (doc.id !== pathId) throw ApiError.badRequest(`Volumes[0].ID ("${doc.id}") does not match the volume id in the path ("${pathId}")`);
  return doc;
}

// ---- A plugin's own volumes and snapshots.

export function encodeExternalVolume(view: ExternalVolumeView): NomadCSIVolumeExternalStub {
  return {
    ExternalID: view.externalId,
    ...(view.capacityBytes !== undefined ? { CapacityBytes: int64Out(view.capacityBytes) } : {}),
    ...(view.publishedNodeIds !== undefined ? { PublishedExternalNodeIDs: [...view.publishedNodeIds] } : {}),
    ...(view.condition ? { IsAbnormal: view.condition.abnormal, Status: view.condition.message } : {}),
    Csiplug: {
      pluginId: view.pluginId,
      ...(view.accessibleTopology !== undefined ? { accessibleTopology: view.accessibleTopology } : {}),
      ...(view.volumeId !== undefined ? { volumeId: view.volumeId } : {}),
    },
  };
}

export function decodeExternalVolume(wire: NomadCSIVolumeExternalStub): ExternalVolumeView {
  return {
    pluginId: wire.Csiplug?.pluginId ?? '',
    externalId: wire.ExternalID,
    ...(wire.CapacityBytes !== undefined ? { capacityBytes: wire.CapacityBytes } : {}),
    ...(wire.Csiplug?.accessibleTopology !== undefined ? { accessibleTopology: wire.Csiplug.accessibleTopology } : {}),
    ...(wire.PublishedExternalNodeIDs ? { publishedNodeIds: [...wire.PublishedExternalNodeIDs] } : {}),
    ...(wire.IsAbnormal !== undefined || wire.Status !== undefined
      ? { condition: { abnormal: wire.IsAbnormal ?? false, message: wire.Status ?? '' } }
      : {}),
    ...(wire.Csiplug?.volumeId !== undefined ? { volumeId: wire.Csiplug.volumeId } : {}),
  };
}

/** A snapshot as Nomad's CSISnapshot: CreateTime in Unix seconds, as Nomad takes it from the plugin. */
export function encodeSnapshot(view: SnapshotView): NomadCSISnapshot {
  return {
    ID: view.id,
    ExternalSourceVolumeID: view.externalSourceVolumeId,
    SizeBytes: int64Out(view.sizeBytes),
    CreateTime: view.createTime === undefined ? 0 : Math.floor(view.createTime / 1000),
    IsReady: view.ready,
    SourceVolumeID: view.sourceVolumeId ?? '',
    PluginID: view.pluginId,
  };
}

export function decodeSnapshot(wire: NomadCSISnapshot): SnapshotView {
  return {
    pluginId: wire.PluginID,
    id: wire.ID,
    externalSourceVolumeId: wire.ExternalSourceVolumeID,
    ...(wire.SourceVolumeID ? { sourceVolumeId: wire.SourceVolumeID } : {}),
    sizeBytes: wire.SizeBytes,
    ...(wire.CreateTime ? { createTime: wire.CreateTime * 1000 } : {}),
    ready: wire.IsReady,
  };
}
