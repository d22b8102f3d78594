// Nomad's CSI volume API as a Nomad tool drives it, against a real agent
// and the real hostpath plugin: a create with Nomad's CSIVolumeCreateRequest,
// a register as Terraform's nomad_csi_volume_registration sends it (Go's
// api.CSIVolume with every field, zero values included), the volume read
// back with Nomad's field names and, once a job mounts it, its claims in
// ReadAllocs/WriteAllocs and Allocations; the list filtered by plugin_id and
// node_id; a register again with new secrets (an update, claims kept); the
// plugin's own volumes; a snapshot taken, listed and deleted; a deregister
// and a delete. Answers are sanitized as Nomad's CSIVolume.Sanitize (Secrets
// null, mount flags "[REDACTED]"), and a volume read and registered back is
// refused rather than stored with the placeholders. `nomad volume status`'s
// host-volume list is empty. Every answer carries X-Nomad-Index. The shapes read are declared here, copied from api/csi.go.
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { AgentHarness, PLUGIN_JOB, pollUntil, workloadJob } from '../support/agent-process';
import { NomadApi, NomadResponseError, type NomadAnswer } from './nomad-api';

jest.setTimeout(180_000);

/** api.CSIVolumeCapability */
interface CSIVolumeCapability {
  AccessMode: string;
  AttachmentMode: string;
}

/** api.AllocationListStub (the fields a volume's Allocations are read for). */
interface AllocationListStub {
  ID: string;
  Name: string;
  NodeID: string;
  JobID: string;
  JobVersion: number;
  TaskGroup: string;
  ClientStatus: string;
  DesiredStatus: string;
  /** Unix nanoseconds */
  CreateTime: number;
}

/** api.CSIVolume (the fields Terraform's provider and `nomad volume status` read). */
interface CSIVolume {
  ID: string;
  Name: string;
  ExternalID: string;
  Namespace: string;
  Topologies: { Segments: Record<string, string> }[] | null;
  AccessMode: string;
  AttachmentMode: string;
  MountOptions: { FSType: string; MountFlags: string[] | null } | null;
  Secrets: Record<string, string> | null;
  Parameters: Record<string, string> | null;
  Capacity: number;
  RequestedCapacityMin: number;
  RequestedCapabilities: CSIVolumeCapability[] | null;
  ReadAllocs: Record<string, null>;
  WriteAllocs: Record<string, null>;
  Allocations: AllocationListStub[];
  Schedulable: boolean;
  PluginID: string;
  Provider: string;
  ProviderVersion: string;
  ControllerRequired: boolean;
  ControllersHealthy: number;
  ControllersExpected: number;
  NodesHealthy: number;
  NodesExpected: number;
  CreateTime: number;
}

/** api.CSIVolumeListStub */
interface CSIVolumeListStub {
  ID: string;
  Namespace: string;
  Name: string;
  ExternalID: string;
  AccessMode: string;
  AttachmentMode: string;
  CurrentReaders: number;
  CurrentWriters: number;
  Schedulable: boolean;
  PluginID: string;
  Provider: string;
  ControllersHealthy: number;
  NodesHealthy: number;
  CreateTime: number;
}

/** api.CSIVolumeRegisterResponse and api.CSIVolumeCreateResponse. */
interface CSIVolumeWriteResponse {
  Volumes: CSIVolume[];
  Warnings: string;
}

/** api.CSISnapshot, as answered. */
interface CSISnapshot {
  ID: string;
  ExternalSourceVolumeID: string;
  SizeBytes: number;
  CreateTime: number;
  IsReady: boolean;
  SourceVolumeID: string;
  PluginID: string;
}

/** api.CSIVolumeListExternalResponse */
interface CSIVolumeListExternalResponse {
  Volumes: { ExternalID: string; CapacityBytes: number }[];
  NextToken: string;
}

const SINGLE_WRITER: CSIVolumeCapability = { AccessMode: 'single-node-writer', AttachmentMode: 'file-system' };

/** An api.CSIVolume as Go's encoding/json writes it: every field, the ones not set at their zero value. */
function goCSIVolume(set: Record<string, unknown>): Record<string, unknown> {
  return {
    ID: '',
    Name: '',
    ExternalID: '',
    Namespace: '',
    RequestedTopologies: null,
    Topologies: null,
    AccessMode: '',
    AttachmentMode: '',
    MountOptions: null,
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
    PluginID: '',
    Provider: '',
    ProviderVersion: '',
    ControllerRequired: false,
    ControllersHealthy: 0,
    ControllersExpected: 0,
    NodesHealthy: 0,
    NodesExpected: 0,
    ResourceExhausted: '0001-01-01T00:00:00Z',
    CreateIndex: 0,
    ModifyIndex: 0,
    CreateTime: 0,
    ModifyTime: 0,
    ...set,
  };
}

/** A CSIVolumeRegisterRequest (or CSIVolumeCreateRequest) as api.CSIVolumes.Register sends it: PolicyOverride and the WriteRequest with it. */
const writeRequest = (volume: Record<string, unknown>) => ({
  Volumes: [volume],
  PolicyOverride: false,
  Region: '',
  Namespace: '',
  SecretID: '',
});

/** What terraform-provider-nomad's nomad_csi_volume_registration builds (resourceCSIVolumeRegistrationCreate): no mount_options or topology_request block. */
const terraformRegistration = (id: string, externalId: string, secrets: Record<string, string>) =>
  writeRequest(
    goCSIVolume({
      ID: id,
      Name: id,
      ExternalID: externalId,
      RequestedCapabilities: [SINGLE_WRITER],
      Secrets: secrets,
      Parameters: {},
      Context: {},
      PluginID: 'hostpath',
      // COMPAT(1.5.0) in the provider: the first capability at the top level too.
      AccessMode: SINGLE_WRITER.AccessMode,
      AttachmentMode: SINGLE_WRITER.AttachmentMode,
    }),
  );

function expectIndex(answer: NomadAnswer<unknown>): void {
  expect(answer.status).toBe(200);
  expect(answer.headers['x-nomad-index']).toMatch(/^\d+$/);
  expect(answer.lastIndex).toBeGreaterThan(0);
}

async function refusal(p: Promise<unknown>): Promise<NomadResponseError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof NomadResponseError)) throw new Error(`expected an error answer, got ${String(err)}`);
  return err;
}

describe("Nomad's CSI volume API against the hostpath plugin", () => {
  let h: AgentHarness;
  let nomad: NomadApi;

  beforeAll(async () => {
    h = new AgentHarness();
    await h.start();
    nomad = new NomadApi(h.api.address);
    await h.api.runJob(jobToNomadJson(await parseJobspec(PLUGIN_JOB, 'plugin.hcl')));
    await pollUntil('plugin hostpath healthy', async () => {
      const p = await h.api.getPlugin('hostpath').catch(() => undefined);
      return p && p.nodesHealthy === 1 && p.controllersHealthy === 1 ? p : undefined;
    });
  });
  afterAll(async () => {
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual([]);
  });

  it('creates, registers as Terraform does, shows the claims of a job, lists with filters, updates secrets, snapshots, deregisters and deletes', async () => {
    // Create (CSIVolumeCreateRequest), then deregister: the plugin keeps it, to be registered as an existing volume.
    const created = await nomad.put<CSIVolumeWriteResponse>(
      '/v1/volume/csi/scratch/create',
      writeRequest(
        goCSIVolume({
          ID: 'scratch',
          Name: 'scratch',
          PluginID: 'hostpath',
          RequestedCapabilities: [SINGLE_WRITER],
          RequestedCapacityMin: 1 << 20,
        }),
      ),
    );
    expectIndex(created);
    expect(created.body.Warnings).toBe('');
    expect(created.body.Volumes).toHaveLength(1);
    const scratch = created.body.Volumes[0]!;
    expect(scratch).toMatchObject({
      ID: 'scratch',
      Name: 'scratch',
      Namespace: 'default',
      PluginID: 'hostpath',
      RequestedCapacityMin: 1 << 20,
    });
    expect(typeof scratch.ExternalID).toBe('string');
    expect(scratch.ExternalID).not.toBe('');
    expect(scratch.Capacity).toBeGreaterThanOrEqual(1 << 20);
    const deregistered = await nomad.delete<null>('/v1/volume/csi/scratch', { force: false });
    expectIndex(deregistered);
    expect(deregistered.body ?? null).toBeNull();

    // Register the plugin's volume as Terraform's nomad_csi_volume_registration does (the namespace in the query, as its WriteOptions).
    const registered = await nomad.put<CSIVolumeWriteResponse>(
      '/v1/volume/csi/data',
      terraformRegistration('data', scratch.ExternalID, { token: 'first' }),
      { namespace: 'default' },
    );
    expectIndex(registered);
    // Nomad's CSIVolume.Sanitize: Secrets null.
    expect(registered.body.Volumes[0]).toMatchObject({ ID: 'data', ExternalID: scratch.ExternalID, Secrets: null });
    expect(JSON.stringify(registered.body)).not.toContain('first');

    // Read back as Terraform's resourceCSIVolumeRead and `nomad volume status` do.
    const read = await nomad.get<CSIVolume>('/v1/volume/csi/data', { namespace: 'default' });
    expectIndex(read);
    expect(read.body).toMatchObject({
      ID: 'data',
      Name: 'data',
      Namespace: 'default',
      ExternalID: scratch.ExternalID,
      PluginID: 'hostpath',
      // As the plugin says (hostpath's controller does not publish).
      ControllerRequired: (await h.api.getPlugin('hostpath')).controllerRequired,
      ControllersHealthy: 1,
      ControllersExpected: 1,
      NodesHealthy: 1,
      NodesExpected: 1,
      Schedulable: true,
      RequestedCapabilities: [SINGLE_WRITER],
      Secrets: null,
      ReadAllocs: {},
      WriteAllocs: {},
      Allocations: [],
    });
    expect(typeof read.body.Provider).toBe('string');
    expect(read.body.Provider).not.toBe('');
    expect(Number.isInteger(read.body.CreateTime)).toBe(true);
    expect(read.body.CreateTime).toBeGreaterThan(Date.UTC(2020, 0, 1) * 1_000_000);

    // A job mounts it: its claim shows as Nomad shows claims.
    const run = await h.api.runJob(jobToNomadJson(await parseJobspec(workloadJob('writer', 'data'), 'writer.hcl')));
    const allocId = run.allocIds[0]!;
    await pollUntil('the writer running', async () => ((await h.api.getAlloc(allocId)).clientStatus === 'running' ? true : undefined));
    const claimed = (await nomad.get<CSIVolume>('/v1/volume/csi/data')).body;
    expect(claimed.WriteAllocs).toEqual({ [allocId]: null });
    expect(claimed.ReadAllocs).toEqual({});
    expect(claimed.AccessMode).toBe('single-node-writer');
    expect(claimed.AttachmentMode).toBe('file-system');
    expect(claimed.Allocations).toHaveLength(1);
    const stub = claimed.Allocations[0]!;
    expect(stub).toMatchObject({ ID: allocId, JobID: 'writer', TaskGroup: 'app', ClientStatus: 'running', DesiredStatus: 'run' });
    expect(stub.Name).toMatch(/^writer\.app\[0\]$/);
    // The full AllocationListStub (alloc-wire.ts encodeAllocStub): `nomad volume status ID` prints its JobVersion and CreateTime.
    expect(stub.JobVersion).toBe(0);
    expect(stub.CreateTime).toBeGreaterThan(Date.UTC(2020, 0, 1) * 1_000_000);
    const nodeId = stub.NodeID;
    expect(nodeId).toBe((await h.api.health()).nodeId);

    // The list (CSIVolumeListStub), and its plugin_id and node_id filters.
    const list = await nomad.get<CSIVolumeListStub[]>('/v1/volumes', { type: 'csi' });
    expectIndex(list);
    expect(list.body).toHaveLength(1);
    expect(list.body[0]).toMatchObject({
      ID: 'data',
      Namespace: 'default',
      Name: 'data',
      ExternalID: scratch.ExternalID,
      AccessMode: 'single-node-writer',
      AttachmentMode: 'file-system',
      CurrentReaders: 0,
      CurrentWriters: 1,
      Schedulable: true,
      PluginID: 'hostpath',
      ControllersHealthy: 1,
      NodesHealthy: 1,
    });
    expect(list.body[0]).not.toHaveProperty('Secrets');
    const ids = async (query: Record<string, string>) =>
      (await nomad.get<CSIVolumeListStub[]>('/v1/volumes', { type: 'csi', ...query })).body.map((v) => v.ID);
    expect(await ids({ plugin_id: 'hostpath' })).toEqual(['data']);
    expect(await ids({ plugin_id: 'no-such-plugin' })).toEqual([]);
    expect(await ids({ node_id: nodeId })).toEqual(['data']);
    expect(await ids({ node_id: 'another-node' })).toEqual([]);

    // Register again with new secrets (Terraform's update): the claim is kept.
    const updated = await nomad.put<CSIVolumeWriteResponse>(
      '/v1/volume/csi/data',
      terraformRegistration('data', scratch.ExternalID, { token: 'second' }),
    );
    expectIndex(updated);
    expect(updated.body.Volumes[0]!.WriteAllocs).toEqual({ [allocId]: null });
    expect(JSON.stringify(updated.body)).not.toContain('second');

    // The plugin's own volumes (CSIVolumeListExternalResponse): the registered one among them.
    const external = await nomad.get<CSIVolumeListExternalResponse>('/v1/volumes/external', { plugin_id: 'hostpath' });
    expectIndex(external);
    expect(typeof external.body.NextToken).toBe('string');
    expect(external.body.Volumes.map((v) => v.ExternalID)).toContain(scratch.ExternalID);

    // Snapshots as api.CSIVolumes.CreateSnapshot, ListSnapshotsOpts and DeleteSnapshot send them (secrets in the header too).
    const snapped = await nomad.put<{ Snapshots: CSISnapshot[] }>(
      '/v1/volumes/snapshot',
      {
        Snapshots: [
          {
            ID: '',
            ExternalSourceVolumeID: '',
            SizeBytes: 0,
            CreateTime: 0,
            IsReady: false,
            SourceVolumeID: 'data',
            PluginID: 'hostpath',
            Name: 'nightly',
            Secrets: {},
            Parameters: {},
          },
        ],
        Region: '',
        Namespace: '',
        SecretID: '',
      },
      {},
      { 'X-Nomad-CSI-Secrets': '' },
    );
    expectIndex(snapped);
    const snap = snapped.body.Snapshots[0]!;
    expect(snap).toMatchObject({ SourceVolumeID: 'data', ExternalSourceVolumeID: scratch.ExternalID, PluginID: 'hostpath', IsReady: true });
    expect(typeof snap.ID).toBe('string');
    // Unix seconds, as Nomad takes it from the plugin.
    expect(snap.CreateTime).toBeGreaterThan(Date.UTC(2020, 0, 1) / 1000);
    expect(snap.CreateTime).toBeLessThan(Date.UTC(2100, 0, 1) / 1000);
    const snapshots = await nomad.get<{ Snapshots: CSISnapshot[]; NextToken: string }>('/v1/volumes/snapshot', { plugin_id: 'hostpath' });
    expectIndex(snapshots);
    expect(snapshots.body.Snapshots.map((x) => x.ID)).toContain(snap.ID);
    expect(typeof snapshots.body.NextToken).toBe('string');
    const unsnapped = await nomad.delete<null>('/v1/volumes/snapshot', { snapshot_id: snap.ID, plugin_id: 'hostpath' });
    expectIndex(unsnapped);
    expect(unsnapped.body ?? null).toBeNull();

    // A claimed volume is not deleted; once the job stops, it is (the secrets in Nomad's header).
    expect((await refusal(nomad.delete('/v1/volume/csi/data/delete'))).status).toBe(409);
    await h.api.stopJob('writer');
    await pollUntil('the claim released', async () => {
      const v = (await nomad.get<CSIVolume>('/v1/volume/csi/data')).body;
      return Object.keys(v.WriteAllocs).length === 0 && v.Allocations.length === 0 ? v : undefined;
    });
    const deleted = await nomad.delete<null>('/v1/volume/csi/data/delete', {}, { 'X-Nomad-CSI-Secrets': 'token=second' });
    expectIndex(deleted);
    expect(deleted.body ?? null).toBeNull();
    const gone = await refusal(nomad.get('/v1/volume/csi/data'));
    expect(gone.status).toBe(404);
    expect((await nomad.get<CSIVolumeListStub[]>('/v1/volumes', { type: 'csi' })).body).toEqual([]);
  });

  it('refuses a register body that is not one CSIVolume named by the path, naming the field', async () => {
    const one = goCSIVolume({ ID: 'x', PluginID: 'hostpath', ExternalID: 'e', RequestedCapabilities: [SINGLE_WRITER] });
    const two = await refusal(nomad.put('/v1/volume/csi/x', { ...writeRequest(one), Volumes: [one, one] }));
    expect(two.status).toBe(400);
    expect(two.text).toMatch(/Volumes must hold exactly one volume/);
    const other = await refusal(nomad.put('/v1/volume/csi/y', writeRequest(one)));
    expect(other.status).toBe(400);
    expect(other.text).toBe('Volumes[0].ID ("x") does not match the volume id in the path ("y")');
    const noMode = await refusal(
      nomad.put('/v1/volume/csi/x', writeRequest({ ...one, RequestedCapabilities: [{ AccessMode: '', AttachmentMode: 'file-system' }] })),
    );
    expect(noMode.status).toBe(400);
    expect(noMode.text).toMatch(/^Volumes\[0\]\.RequestedCapabilities\[0\]\.AccessMode is required/);
    // A check of csiplug's volume spec, named as the body's field.
    const badMode = await refusal(
      nomad.put(
        '/v1/volume/csi/x',
        writeRequest({ ...one, RequestedCapabilities: [{ AccessMode: 'bogus', AttachmentMode: 'file-system' }] }),
      ),
    );
    expect(badMode.status).toBe(400);
    expect(badMode.text).toMatch(/^Volumes\[0\]\.RequestedCapabilities\[0\]\.AccessMode must be one of single-node-writer/);
  });

  it('answers mount flags as "[REDACTED]" and refuses them sent back; lists no host volumes; refuses another namespace', async () => {
    const created = await nomad.put<CSIVolumeWriteResponse>(
      '/v1/volume/csi/flagged/create',
      writeRequest(
        goCSIVolume({
          ID: 'flagged',
          PluginID: 'hostpath',
          RequestedCapabilities: [SINGLE_WRITER],
          MountOptions: { FSType: '', MountFlags: ['noatime'] },
          Secrets: { token: 'kept' },
        }),
      ),
    );
    expectIndex(created);
    expect(created.body.Volumes[0]).toMatchObject({ Secrets: null, MountOptions: { MountFlags: ['[REDACTED]'] } });
    const read = await nomad.get<CSIVolume>('/v1/volume/csi/flagged');
    expect(read.body).toMatchObject({ Secrets: null, MountOptions: { MountFlags: ['[REDACTED]'] } });
    expect(JSON.stringify(read.body)).not.toContain('noatime');
    expect(JSON.stringify(read.body)).not.toContain('kept');

    // Read, modified, registered back (as a tool that round-trips the volume would): refused, naming the field.
    const back = await refusal(
      nomad.put('/v1/volume/csi/flagged', writeRequest({ ...read.body, MountOptions: null, Secrets: { token: '[REDACTED]' } })),
    );
    expect(back.status).toBe(400);
    expect(back.text).toMatch(/^Volumes\[0\]\.Secrets\.token is "\[REDACTED\]".*send the real value/);
    const flags = await refusal(nomad.put('/v1/volume/csi/flagged', writeRequest(read.body as unknown as Record<string, unknown>)));
    expect(flags.status).toBe(400);
    expect(flags.text).toMatch(/^Volumes\[0\]\.MountOptions\.MountFlags\[0\] is "\[REDACTED\]".*send the real mount flags/);

    // `nomad volume status` (no -type) lists host volumes first: none here.
    const host = await nomad.get<unknown[]>('/v1/volumes', { type: 'host' });
    expectIndex(host);
    expect(host.body).toEqual([]);
    const otherNamespace = await refusal(nomad.get('/v1/volumes', { type: 'csi', namespace: 'prod' }));
    expect(otherNamespace.status).toBe(400);
    expect(otherNamespace.text).toMatch(/namespace "prod" is not known: csiplug has one namespace, "default"/);

    // Terraform's nomad_csi_volume update is a create again: Nomad reconciles the volume it has (Merge, then expand).
    const again = goCSIVolume({
      ID: 'flagged',
      PluginID: 'hostpath',
      RequestedCapabilities: [SINGLE_WRITER, { AccessMode: 'single-node-reader-only', AttachmentMode: 'file-system' }],
      MountOptions: { FSType: '', MountFlags: ['nodiratime'] },
      Secrets: { token: 'rotated' },
    });
    const updated = await nomad.put<CSIVolumeWriteResponse>('/v1/volume/csi/flagged/create', writeRequest(again));
    expectIndex(updated);
    expect(updated.body.Volumes[0]).toMatchObject({
      ID: 'flagged',
      ExternalID: created.body.Volumes[0]!.ExternalID,
      RequestedCapabilities: again['RequestedCapabilities'],
      Secrets: null,
    });
    const renamed = await refusal(nomad.put('/v1/volume/csi/flagged/create', writeRequest({ ...again, Name: 'other' })));
    expect(renamed.status).toBe(409);
    expect(renamed.text).toMatch(/its name cannot change/);

    const deleted = await nomad.delete<null>('/v1/volume/csi/flagged/delete');
    expectIndex(deleted);
  });
});
