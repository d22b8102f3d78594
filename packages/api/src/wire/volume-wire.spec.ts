// The volume area's wire both ways: a volume, a plugin's own volume and a
// snapshot decode to the view they were encoded from (every optional field
// set, and none) sanitized as Nomad's CSIVolume.Sanitize (Secrets null, mount
// flags "[REDACTED]"), a list stub to the same view; a volume spec document
// goes to Nomad's CSIVolume and back through the server's reader unchanged.
import { validateVolumeSpec, volumeSpecToDocument, type VolumeSpecDocument } from '@csiplug/jobspec';
import { ApiError } from '../api-error';
import type { ExternalVolumeView, SnapshotView, VolumeView } from '../service';
import {
  decodeExternalVolume,
  decodeSnapshot,
  decodeVolume,
  decodeVolumeStub,
  encodeExternalVolume,
  encodeSnapshot,
  encodeVolume,
  encodeVolumeStub,
  nomadVolumeToDocument,
  requestedVolumeDocument,
  volumeDocumentToNomad,
  type NomadCSIVolume,
  type VolumeWireContext,
} from './volume-wire';

const ctx: VolumeWireContext = {
  nodeId: 'node-1',
  plugin: {
    provider: 'hostpath.csi.k8s.io',
    version: 'v1.11.0',
    controllerRequired: true,
    controllersHealthy: 1,
    controllersExpected: 1,
    nodesHealthy: 1,
    nodesExpected: 2,
  },
  allocOf: (id) =>
    id === 'a-read'
      ? ({
          ID: 'a-read',
          Name: 'web.app[0]',
          Namespace: 'default',
          NodeID: 'node-1',
          JobID: 'web',
          JobType: 'service',
          JobVersion: 3,
          TaskGroup: 'app',
          ClientStatus: 'running',
          DesiredStatus: 'run',
          TaskStates: {},
          CreateTime: 1_733_325_001_000_000_000,
          ModifyTime: 1_733_325_002_000_000_000,
        } as unknown as ReturnType<VolumeWireContext['allocOf']>)
      : undefined,
};

const full: VolumeView = {
  id: 'data',
  name: 'Data',
  type: 'csi',
  pluginId: 'hostpath',
  externalId: 'ext-1',
  capabilities: [
    { accessMode: 'single-node-writer', attachmentMode: 'file-system' },
    { accessMode: 'multi-node-reader-only', attachmentMode: 'block-device' },
  ],
  mountOptions: { fsType: 'ext4', mountFlags: ['noatime'] },
  capacityMin: 1024,
  capacityMax: 4096,
  parameters: { p: '1' },
  secrets: { s: 'hunter2' },
  context: { c: '2' },
  snapshotId: 'snap-1',
  topologyRequest: { required: [{ segments: { rack: 'r1' } }], preferred: [{ segments: { rack: 'r2' } }] },
  capacityBytes: 2048,
  accessibleTopology: [{ segments: { rack: 'r1' } }],
  schedulable: true,
  claims: [
    { allocId: 'a-write', mode: 'write', accessMode: 'single-node-writer', attachmentMode: 'file-system', since: 1_733_325_000_123 },
    { allocId: 'a-read', mode: 'read', accessMode: 'single-node-writer', attachmentMode: 'file-system', since: 1_733_325_001_456 },
  ],
  publishContexts: { 'a-write': { device: '/dev/x' } },
  createdAt: 1_733_324_000_789,
  mounts: [
    {
      allocId: 'a-write',
      name: 'data',
      desired: 'mounted',
      claimed: true,
      staged: true,
      published: true,
      targetPath: '/mnt/x',
      pendingUnmount: false,
      check: { state: 'ok', message: 'fine', time: 1_733_325_002_000 },
      attempts: 0,
      lastError: 'earlier',
      since: 1_733_325_000_000,
    },
  ],
  nodeExpansion: [{ allocId: 'a-write', name: 'data', capacityBytes: 4096, deferred: true }],
};

const bare: VolumeView = {
  id: 'v',
  name: 'v',
  type: 'csi',
  pluginId: 'hostpath',
  externalId: 'ext-2',
  capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }],
  parameters: {},
  secrets: {},
  context: {},
  schedulable: false,
  claims: [],
  createdAt: 1_733_324_000_000,
};

/** A volume as every answer gives it (Nomad's CSIVolume.Sanitize): no secrets, mount flags one "[REDACTED]". */
function sanitized(view: VolumeView): VolumeView {
  const flags = view.mountOptions?.mountFlags;
  return {
    ...view,
    secrets: {},
    ...(view.mountOptions && flags ? { mountOptions: { ...view.mountOptions, mountFlags: flags.length > 0 ? ['[REDACTED]'] : [] } } : {}),
  };
}

/** Through JSON, as the wire carries it. */
function wire<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

describe('a volume on the wire (CSIVolume)', () => {
  it.each([
    ['every optional field set', full],
    ['none set', bare],
  ])('decodes to the view it was encoded from, sanitized: %s', (_, view) => {
    expect(decodeVolume(wire(encodeVolume(view, ctx)))).toEqual(sanitized(view));
  });

  it.each([
    ['every optional field set', full],
    ['none set', bare],
  ])('a list stub decodes to the same view, one request serving the list: %s', (_, view) => {
    const stub = wire(encodeVolumeStub(view, ctx));
    expect(decodeVolumeStub(stub)).toEqual(sanitized(view));
    expect(JSON.stringify(stub)).not.toContain('hunter2');
    expect(JSON.stringify(stub)).not.toContain('noatime');
  });

  it('never answers a secret or a mount flag: Secrets null and flags "[REDACTED]", as Nomad\'s CSIVolume.Sanitize', () => {
    const v = wire(encodeVolume(full, ctx));
    expect(v.Secrets).toBeNull();
    expect(v.MountOptions).toEqual({ FSType: 'ext4', MountFlags: ['[REDACTED]'] });
    expect(JSON.stringify(v)).not.toContain('hunter2');
    expect(JSON.stringify(v)).not.toContain('noatime');
    expect(wire(encodeVolume({ ...bare, mountOptions: { fsType: 'xfs', mountFlags: [] } }, ctx)).MountOptions).toEqual({
      FSType: 'xfs',
      MountFlags: [],
    });
  });

  it("clamps an int64 byte count past 2^53−1 (a plugin's MaxInt64) so Go's int64 reads the answer", () => {
    const huge = Number('9223372036854775807');
    const v = wire(encodeVolume({ ...bare, capacityBytes: huge, capacityMin: huge, capacityMax: huge }, ctx));
    expect([v.Capacity, v.RequestedCapacityMin, v.RequestedCapacityMax]).toEqual([
      Number.MAX_SAFE_INTEGER,
      Number.MAX_SAFE_INTEGER,
      Number.MAX_SAFE_INTEGER,
    ]);
    expect(JSON.stringify(encodeVolume({ ...bare, capacityBytes: huge }, ctx))).not.toContain('9223372036854776000');
    expect(encodeExternalVolume({ pluginId: 'p', externalId: 'e', capacityBytes: huge }).CapacityBytes).toBe(Number.MAX_SAFE_INTEGER);
    expect(encodeSnapshot({ pluginId: 'p', id: 's', externalSourceVolumeId: 'e', sizeBytes: huge, ready: true }).SizeBytes).toBe(
      Number.MAX_SAFE_INTEGER,
    );
  });

  it("carries Nomad's fields with Nomad's names: claims as ReadAllocs/WriteAllocs and Allocations, plugin health, times", () => {
    const v = wire(encodeVolume(full, ctx));
    expect(v).toMatchObject({
      ID: 'data',
      Name: 'Data',
      Namespace: 'default',
      ExternalID: 'ext-1',
      PluginID: 'hostpath',
      Provider: 'hostpath.csi.k8s.io',
      ProviderVersion: 'v1.11.0',
      ControllerRequired: true,
      ControllersHealthy: 1,
      NodesExpected: 2,
      Schedulable: true,
      Capacity: 2048,
      RequestedCapacityMin: 1024,
      RequestedCapacityMax: 4096,
      AccessMode: 'single-node-writer',
      AttachmentMode: 'file-system',
      ReadAllocs: { 'a-read': null },
      WriteAllocs: { 'a-write': null },
      Topologies: [{ Segments: { rack: 'r1' } }],
      RequestedTopologies: { Required: [{ Segments: { rack: 'r1' } }], Preferred: [{ Segments: { rack: 'r2' } }] },
      CreateTime: 1_733_324_000_789_000_000,
    });
    // A known alloc: its full AllocationListStub (JobVersion, CreateTime, ModifyTime for `nomad volume status ID`).
    expect(v.Allocations).toEqual([{ ID: 'a-write', Namespace: 'default', NodeID: 'node-1' }, ctx.allocOf('a-read')]);
    // No index csiplug does not keep, no modify time it does not track.
    expect(v).not.toHaveProperty('CreateIndex');
    expect(v).not.toHaveProperty('ModifyTime');
  });

  it("lists as CSIVolumeListStub: readers and writers counted, the first claim's modes", () => {
    expect(wire(encodeVolumeStub(full, ctx))).toEqual({
      ID: 'data',
      Namespace: 'default',
      Name: 'Data',
      ExternalID: 'ext-1',
      Topologies: [{ Segments: { rack: 'r1' } }],
      AccessMode: 'single-node-writer',
      AttachmentMode: 'file-system',
      CurrentReaders: 1,
      CurrentWriters: 1,
      Schedulable: true,
      PluginID: 'hostpath',
      Provider: 'hostpath.csi.k8s.io',
      ControllerRequired: true,
      ControllersHealthy: 1,
      ControllersExpected: 1,
      NodesHealthy: 1,
      NodesExpected: 2,
      CreateTime: 1_733_324_000_000_000_000 + 789_000_000,
      Csiplug: expect.objectContaining({ capabilities: full.capabilities, claims: full.claims }),
    });
    expect(encodeVolumeStub(bare, {})).toMatchObject({ AccessMode: '', AttachmentMode: '', CurrentReaders: 0, CurrentWriters: 0 });
  });

  it("reads a Nomad server's volume, which has no Csiplug field: claims from ReadAllocs and WriteAllocs", () => {
    const nomad: NomadCSIVolume = {
      ID: 'v',
      PluginID: 'p',
      ExternalID: 'e',
      AccessMode: 'multi-node-multi-writer',
      AttachmentMode: 'file-system',
      ReadAllocs: { r1: null },
      WriteAllocs: { w1: null },
      Schedulable: true,
      CreateTime: 0,
    };
    expect(decodeVolume(nomad).claims).toEqual([
      { allocId: 'r1', mode: 'read', accessMode: 'multi-node-multi-writer', attachmentMode: 'file-system', since: 0 },
      { allocId: 'w1', mode: 'write', accessMode: 'multi-node-multi-writer', attachmentMode: 'file-system', since: 0 },
    ]);
  });
});

describe("a plugin's own volume (CSIVolumeExternalStub) and a snapshot (CSISnapshot)", () => {
  const external: ExternalVolumeView = {
    pluginId: 'hostpath',
    externalId: 'ext-1',
    capacityBytes: 1024,
    accessibleTopology: [{ segments: { rack: 'r1' } }],
    publishedNodeIds: ['n1'],
    condition: { abnormal: true, message: 'degraded' },
    volumeId: 'data',
  };
  it.each([
    ['every optional field set', external],
    ['none set', { pluginId: 'hostpath', externalId: 'ext-2' }],
  ])('an external volume decodes to its view: %s', (_, view) => {
    expect(decodeExternalVolume(wire(encodeExternalVolume(view)))).toEqual(view);
  });
  it("an external volume's condition is Nomad's IsAbnormal and Status", () => {
    expect(encodeExternalVolume(external)).toMatchObject({
      ExternalID: 'ext-1',
      CapacityBytes: 1024,
      PublishedExternalNodeIDs: ['n1'],
      IsAbnormal: true,
      Status: 'degraded',
    });
  });

  const snapshot: SnapshotView = {
    pluginId: 'hostpath',
    id: 'snap-1',
    externalSourceVolumeId: 'ext-1',
    sourceVolumeId: 'data',
    sizeBytes: 1024,
    createTime: 1_733_325_000_000,
    ready: true,
  };
  it.each([
    ['every optional field set', snapshot],
    ['none set', { pluginId: 'hostpath', id: 's', externalSourceVolumeId: 'e', sizeBytes: 0, ready: false }],
  ])('a snapshot decodes to its view: %s', (_, view) => {
    expect(decodeSnapshot(wire(encodeSnapshot(view)))).toEqual(view);
  });
  it("a snapshot's CreateTime is Unix seconds, as Nomad takes it from the plugin", () => {
    expect(encodeSnapshot(snapshot)).toMatchObject({
      ID: 'snap-1',
      CreateTime: 1_733_325_000,
      IsReady: true,
      SourceVolumeID: 'data',
      PluginID: 'hostpath',
    });
  });
});

describe("a register or create request: csiplug's volume spec document ↔ Nomad's CSIVolume", () => {
  const doc: VolumeSpecDocument = volumeSpecToDocument(
    validateVolumeSpec({
      id: 'data',
      name: 'Data',
      type: 'csi',
      plugin_id: 'hostpath',
      capability: [
        { access_mode: 'single-node-writer', attachment_mode: 'file-system' },
        { access_mode: 'multi-node-reader-only', attachment_mode: 'block-device' },
      ],
      mount_options: { fs_type: 'ext4', mount_flags: ['noatime'] },
      capacity_min: '1GiB',
      capacity_max: '2GiB',
      parameters: { p: '1' },
      secrets: { s: 'x' },
      context: { c: '2' },
      snapshot_id: 'snap-1',
      topology_request: { required: { topology: [{ segments: { rack: 'r1' } }] }, preferred: { topology: [{ segments: { rack: 'r2' } }] } },
    }),
  );

  it.each([
    ['every optional field set', doc],
    [
      'none set',
      volumeSpecToDocument(
        validateVolumeSpec({ id: 'v', type: 'csi', plugin_id: 'p', external_id: 'e', capability: { access_mode: 'single-node-writer' } }),
      ),
    ],
  ])('the server reads the spec the client sent: %s', (_, d) => {
    expect(validateVolumeSpec(nomadVolumeToDocument(wire(volumeDocumentToNomad(d)), 'Volumes[0]'))).toEqual(validateVolumeSpec(d));
  });

  it("reads the body as Go's api.CSIVolume sends it: every zero value, output fields ignored, the old top-level modes", () => {
    const goBody = {
      ID: 'v',
      Name: '',
      ExternalID: 'e',
      Namespace: '',
      RequestedTopologies: null,
      Topologies: null,
      AccessMode: 'single-node-writer',
      AttachmentMode: 'file-system',
      MountOptions: { FSType: '', MountFlags: null },
      Secrets: null,
      Parameters: null,
      Context: null,
      Capacity: 0,
      RequestedCapacityMin: 0,
      RequestedCapacityMax: 0,
      RequestedCapabilities: null,
      CloneID: '',
      SnapshotID: '',
      ReadAllocs: null,
      WriteAllocs: null,
      Allocations: null,
      Schedulable: false,
      PluginID: 'p',
      Provider: '',
      ResourceExhausted: '0001-01-01T00:00:00Z',
      CreateIndex: 0,
      ModifyIndex: 0,
      CreateTime: 0,
      ModifyTime: 0,
    };
    expect(validateVolumeSpec(nomadVolumeToDocument(goBody, 'Volumes[0]'))).toEqual({
      id: 'v',
      name: 'v',
      type: 'csi',
      pluginId: 'p',
      externalId: 'e',
      capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }],
      parameters: {},
      secrets: {},
      context: {},
    });
  });

  const refusal = (fn: () => unknown): ApiError => {
    try {
      fn();
    } catch (err) {
      return err as ApiError;
    }
    throw new Error('it was accepted');
  };

  it("refuses with the Nomad field's path, as a 400", () => {
    const base = { ID: 'v', PluginID: 'p', RequestedCapabilities: [{ AccessMode: 'single-node-writer', AttachmentMode: 'file-system' }] };
    const cases: [unknown, RegExp][] = [
      [{ Volume: base }, /CSIVolumeRegisterRequest like \{ "Volumes"/],
      [{ Volumes: [] }, /exactly one volume.*got 0/],
      [{ Volumes: [base, base] }, /exactly one volume.*got 2/],
      [{ Volumes: [{ ...base, ID: 'w' }] }, /Volumes\[0\]\.ID \("w"\) does not match the volume id in the path \("v"\)/],
      [
        { Volumes: [{ ...base, RequestedCapabilities: [{ AttachmentMode: 'file-system' }] }] },
        /Volumes\[0\]\.RequestedCapabilities\[0\]\.AccessMode is required/,
      ],
      [{ Volumes: [{ ...base, RequestedCapabilities: [] }] }, /Volumes\[0\]\.RequestedCapabilities is required/],
      [{ Volumes: [{ ...base, Secrets: { k: 1 } }] }, /Volumes\[0\]\.Secrets must be an object of string values/],
      [{ Volumes: [{ ...base, RequestedCapacityMin: -1 }] }, /Volumes\[0\]\.RequestedCapacityMin must be a whole number of bytes/],
      [{ Volumes: [{ ...base, Namespace: 'prod' }] }, /Volumes\[0\]\.Namespace "prod" is not known/],
      [
        { Volumes: [{ ...base, RequestedTopologies: { Required: [{ Segments: null }] } }] },
        /Volumes\[0\]\.RequestedTopologies\.Required\[0\]\.Segments/,
      ],
      [{ Volumes: [{ ...base, MountOptions: { MountFlags: 'ro' } }] }, /Volumes\[0\]\.MountOptions\.MountFlags must be a list of strings/],
      // A volume read back (sanitized) and registered again: the placeholder is not the secret nor a flag.
      [
        { Volumes: [{ ...base, Secrets: { token: '[REDACTED]' } }] },
        /^Volumes\[0\]\.Secrets\.token is "\[REDACTED\]", a placeholder, not the secret: send the real value/,
      ],
      [
        { Volumes: [{ ...base, MountOptions: { MountFlags: ['ro', '[REDACTED]'] } }] },
        /^Volumes\[0\]\.MountOptions\.MountFlags\[1\] is "\[REDACTED\]".*send the real mount flags/,
      ],
    ];
    for (const [body, message] of cases) {
      const err = refusal(() => requestedVolumeDocument(body, 'v'));
      expect(err).toBeInstanceOf(ApiError);
      expect(err.status).toBe(400);
      expect(err.message).toMatch(message);
    }
  });
});
