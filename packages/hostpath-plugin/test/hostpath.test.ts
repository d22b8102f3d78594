// The CSI client against the real hostpath plugin process over a unix
// socket, with real bind mounts. Every test unmounts what it mounted and
// stops what it started (Harness.cleanup).
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  CSIError,
  type GrpcCSIClient,
  blockCapability,
  checkConfirmedCapabilities,
  controllerCapabilitiesFrom,
  mountCapability,
  nodeCapabilitiesFrom,
  pluginCapabilitiesFrom,
} from '@csiplug/csi';
import { Harness } from './harness';

jest.setTimeout(60_000);

const RW = mountCapability('SINGLE_NODE_WRITER');

async function failure(p: Promise<unknown>): Promise<CSIError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof CSIError)) throw new Error(`expected a CSIError, got ${String(e)}`);
  return e;
}

describe('hostpath plugin over a unix socket', () => {
  let h: Harness;
  let client: GrpcCSIClient;

  beforeEach(async () => {
    h = new Harness();
    h.spawn();
    client = h.client();
    await h.waitReady(client);
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('runs the whole volume lifecycle with real bind mounts, each call idempotent', async () => {
    const staging = h.path('staging', 'vol');
    const target = h.path('pods', 'p1', 'vol');
    fs.mkdirSync(staging, { recursive: true });
    fs.mkdirSync(path.dirname(target), { recursive: true });

    const created = await client.createVolume({ name: 'data', capacityRange: { requiredBytes: 1 << 20 }, volumeCapabilities: [RW] });
    const again = await client.createVolume({ name: 'data', capacityRange: { requiredBytes: 1 << 20 }, volumeCapabilities: [RW] });
    const volumeId = created.volume!.volumeId;
    expect(again.volume!.volumeId).toBe(volumeId);
    expect(created.volume!.capacityBytes).toBe(String(1 << 20));
    const backing = path.join(h.stateDir, 'volumes', volumeId);
    expect(fs.statSync(backing).isDirectory()).toBe(true);

    await client.nodeGetCapabilities();
    await client.nodeStageVolume({ volumeId, stagingTargetPath: staging, volumeCapability: RW });
    await client.nodeStageVolume({ volumeId, stagingTargetPath: staging, volumeCapability: RW });
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: target, volumeCapability: RW });
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: target, volumeCapability: RW });
    expect(h.mountsHere().sort()).toEqual([staging, target].sort());

    fs.writeFileSync(path.join(target, 'hello.txt'), 'written through the target');
    expect(fs.readFileSync(path.join(backing, 'hello.txt'), 'utf8')).toBe('written through the target');

    const stats = await client.nodeGetVolumeStats({ volumeId, volumePath: target, stagingTargetPath: staging });
    expect(stats.usage.map((u) => u.unit).sort()).toEqual(['BYTES', 'INODES']);
    expect(BigInt(stats.usage.find((u) => u.unit === 'BYTES')!.total)).toBeGreaterThan(0n);

    // in use: cannot be deleted
    expect((await failure(client.deleteVolume({ volumeId }))).codeName).toBe('FAILED_PRECONDITION');

    await client.nodeUnpublishVolume({ volumeId, targetPath: target });
    await client.nodeUnpublishVolume({ volumeId, targetPath: target });
    expect(fs.existsSync(target)).toBe(false);
    await client.nodeUnstageVolume({ volumeId, stagingTargetPath: staging });
    await client.nodeUnstageVolume({ volumeId, stagingTargetPath: staging });
    expect(h.mountsHere()).toEqual([]);
    expect(fs.readFileSync(path.join(backing, 'hello.txt'), 'utf8')).toBe('written through the target');

    await client.deleteVolume({ volumeId });
    await client.deleteVolume({ volumeId });
    expect(fs.existsSync(backing)).toBe(false);
    expect((await client.listVolumes()).entries).toEqual([]);
  });

  it('CreateVolume is idempotent whatever the order of the parameters', async () => {
    const a = await client.createVolume({ name: 'p', volumeCapabilities: [RW], parameters: { tier: 'fast', zone: 'a' } });
    const b = await client.createVolume({ name: 'p', volumeCapabilities: [RW], parameters: { zone: 'a', tier: 'fast' } });
    expect(b.volume!.volumeId).toBe(a.volume!.volumeId);
    expect(
      (await failure(client.createVolume({ name: 'p', volumeCapabilities: [RW], parameters: { zone: 'b', tier: 'fast' } }))).codeName,
    ).toBe('ALREADY_EXISTS');
  });

  it('unpublish and unstage of a volume it no longer knows still clear the paths, then say NOT_FOUND', async () => {
    const staging = h.path('staging', 'gone');
    const target = h.path('pods', 'p2', 'gone');
    fs.mkdirSync(staging, { recursive: true });
    fs.mkdirSync(path.dirname(target), { recursive: true });
    const volumeId = (await client.createVolume({ name: 'gone', volumeCapabilities: [RW] })).volume!.volumeId;
    await client.nodeGetCapabilities();
    await client.nodeStageVolume({ volumeId, stagingTargetPath: staging, volumeCapability: RW });
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: target, volumeCapability: RW });
    // the plugin loses its metadata (e.g. a fresh state dir after a restart)
    fs.writeFileSync(path.join(h.stateDir, 'volumes.json'), JSON.stringify({ version: 1, volumes: [] }));
    expect((await failure(client.nodeUnpublishVolume({ volumeId, targetPath: target }))).codeName).toBe('NOT_FOUND');
    expect((await failure(client.nodeUnstageVolume({ volumeId, stagingTargetPath: staging }))).codeName).toBe('NOT_FOUND');
    expect(h.mountsHere()).toEqual([]);
  });

  it('publishes read-only when asked', async () => {
    const { volume } = await client.createVolume({ name: 'ro', volumeCapabilities: [RW] });
    const volumeId = volume!.volumeId;
    const staging = h.path('staging', 'ro');
    fs.mkdirSync(staging, { recursive: true });
    await client.nodeStageVolume({ volumeId, stagingTargetPath: staging, volumeCapability: RW });
    const target = h.path('ro-target');
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: target, volumeCapability: RW, readonly: true });
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: target, volumeCapability: RW, readonly: true });
    expect(() => fs.writeFileSync(path.join(target, 'x'), 'x')).toThrow(/EROFS|read-only/);
    // same target, different readonly flag: ALREADY_EXISTS per spec
    const e = await failure(
      client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: target, volumeCapability: RW, readonly: false }),
    );
    expect(e.codeName).toBe('ALREADY_EXISTS');
    await client.nodeUnpublishVolume({ volumeId, targetPath: target });
    await client.nodeUnstageVolume({ volumeId, stagingTargetPath: staging });
    expect(h.mountsHere()).toEqual([]);
  });

  it('reports identity, capabilities, node info with topology, capacity and paginated lists', async () => {
    expect(await client.getPluginInfo()).toMatchObject({ name: 'hostpath.csiplug.io', manifest: { mode: 'monolith' } });
    expect(pluginCapabilitiesFrom(await client.getPluginCapabilities())).toMatchObject({
      controllerService: true,
      accessibilityConstraints: true,
      onlineExpansion: true,
    });
    expect(nodeCapabilitiesFrom(await client.nodeGetCapabilities())).toMatchObject({
      stageUnstageVolume: true,
      getVolumeStats: true,
      expandVolume: true,
    });
    expect(controllerCapabilitiesFrom(await client.controllerGetCapabilities())).toMatchObject({
      createDeleteVolume: true,
      listVolumes: true,
      getCapacity: true,
      publishUnpublishVolume: false,
    });
    expect(await client.nodeGetInfo()).toEqual({
      nodeId: 'node-1',
      maxVolumesPerNode: '0',
      accessibleTopology: { segments: { 'topology.hostpath.csiplug.io/node': 'node-1' } },
    });
    expect(BigInt((await client.getCapacity()).availableCapacity)).toBeGreaterThan(0n);

    for (const name of ['a', 'b', 'c']) await client.createVolume({ name, volumeCapabilities: [RW] });
    const page1 = await client.listVolumes({ maxEntries: 2 });
    expect(page1.entries).toHaveLength(2);
    const page2 = await client.listVolumes({ maxEntries: 2, startingToken: page1.nextToken });
    expect(page2.entries).toHaveLength(1);
    expect(page2.nextToken).toBe('');
    expect((await failure(client.listVolumes({ startingToken: 'nope' }))).codeName).toBe('ABORTED');
  });

  it('confirms supported capabilities and declines the rest', async () => {
    const { volume } = await client.createVolume({ name: 'v', volumeCapabilities: [RW] });
    const want = [mountCapability('SINGLE_NODE_WRITER', { mountFlags: ['noexec'] })];
    const ok = await client.validateVolumeCapabilities({ volumeId: volume!.volumeId, volumeCapabilities: want });
    expect(checkConfirmedCapabilities(want, ok)).toEqual({ ok: true });
    const block = [blockCapability('SINGLE_NODE_WRITER')];
    const no = await client.validateVolumeCapabilities({ volumeId: volume!.volumeId, volumeCapabilities: block });
    expect(checkConfirmedCapabilities(block, no)).toEqual({ ok: false, reason: expect.stringContaining('block access is not supported') });
    expect((await failure(client.validateVolumeCapabilities({ volumeId: 'missing', volumeCapabilities: want }))).codeName).toBe(
      'NOT_FOUND',
    );
  });

  it('answers with honest status codes', async () => {
    const stagingPath = h.path('s');
    fs.mkdirSync(stagingPath);
    const nf = [
      client.nodeStageVolume({ volumeId: 'nope', stagingTargetPath: stagingPath, volumeCapability: RW }),
      client.nodePublishVolume({ volumeId: 'nope', stagingTargetPath: stagingPath, targetPath: h.path('t'), volumeCapability: RW }),
      client.nodeUnpublishVolume({ volumeId: 'nope', targetPath: h.path('t') }),
      client.nodeUnstageVolume({ volumeId: 'nope', stagingTargetPath: stagingPath }),
      client.nodeGetVolumeStats({ volumeId: 'nope', volumePath: stagingPath }),
    ];
    for (const p of nf) {
      const e = await failure(p);
      expect(e.codeName).toBe('NOT_FOUND');
      expect(e.isNotFound()).toBe(true);
    }
    const { volume } = await client.createVolume({ name: 'x', capacityRange: { requiredBytes: 100 }, volumeCapabilities: [RW] });
    const volumeId = volume!.volumeId;
    expect(
      (await failure(client.createVolume({ name: 'x', capacityRange: { requiredBytes: 5000 }, volumeCapabilities: [RW] }))).codeName,
    ).toBe('ALREADY_EXISTS');
    expect((await failure(client.createVolume({ name: 'y', volumeCapabilities: [blockCapability('SINGLE_NODE_WRITER')] }))).codeName).toBe(
      'INVALID_ARGUMENT',
    );
    expect(
      (await failure(client.createVolume({ name: 'z', capacityRange: { requiredBytes: 10, limitBytes: 5 }, volumeCapabilities: [RW] })))
        .codeName,
    ).toBe('OUT_OF_RANGE');
    expect((await failure(client.nodeStageVolume({ volumeId, stagingTargetPath: 'relative/path', volumeCapability: RW }))).codeName).toBe(
      'INVALID_ARGUMENT',
    );
    expect(
      (
        await failure(
          client.nodeStageVolume({ volumeId, stagingTargetPath: stagingPath, volumeCapability: blockCapability('SINGLE_NODE_WRITER') }),
        )
      ).codeName,
    ).toBe('FAILED_PRECONDITION');
    // the plugin needs staging; a client that has not read capabilities sends it, and the plugin refuses
    const e = await failure(client.nodePublishVolume({ volumeId, targetPath: h.path('t2'), volumeCapability: RW }));
    expect(e.codeName).toBe('FAILED_PRECONDITION');
    expect(e.local).toBe(false);
    // not staged at that path yet
    expect(
      (
        await failure(
          client.nodePublishVolume({ volumeId, stagingTargetPath: stagingPath, targetPath: h.path('t2'), volumeCapability: RW }),
        )
      ).codeName,
    ).toBe('FAILED_PRECONDITION');
    // once the client knows, it refuses locally without touching the socket
    await client.nodeGetCapabilities();
    const local = await failure(client.nodePublishVolume({ volumeId, targetPath: h.path('t2'), volumeCapability: RW }));
    expect(local).toMatchObject({ codeName: 'INVALID_ARGUMENT', local: true });
    // an unadvertised controller RPC
    expect((await failure(client.controllerPublishVolume({ volumeId, nodeId: 'node-1', volumeCapability: RW }))).isUnimplemented()).toBe(
      true,
    );
    expect(h.mountsHere()).toEqual([]);
  });

  it('keeps volumes across a restart and removes its socket on SIGTERM', async () => {
    const { volume } = await client.createVolume({ name: 'keep', capacityRange: { requiredBytes: 4096 }, volumeCapabilities: [RW] });
    const [first] = (h as unknown as { procs: Array<{ proc: ChildProcess; exited: Promise<{ code: number | null }> }> }).procs;
    first.proc.kill('SIGTERM');
    expect((await first.exited).code).toBe(0);
    expect(fs.existsSync(h.sock)).toBe(false);
    h.spawn();
    await h.waitReady(client);
    const { entries } = await client.listVolumes();
    expect(entries.map((e) => [e.volume!.volumeId, e.volume!.capacityBytes])).toEqual([[volume!.volumeId, '4096']]);
  });
});

describe('hostpath plugin behind symlinks', () => {
  let h: Harness;
  afterEach(async () => {
    await h.cleanup();
  });

  it("compares the kernel's paths: idempotent stage, and no delete of a volume still mounted", async () => {
    h = new Harness();
    fs.mkdirSync(h.path('real-state'), { recursive: true });
    fs.symlinkSync(h.path('real-state'), h.path('state-link'));
    fs.mkdirSync(h.path('real-mnt'), { recursive: true });
    fs.symlinkSync(h.path('real-mnt'), h.path('mnt'));
    h.spawn(['--state-dir', h.path('state-link')]);
    const client = h.client();
    await h.waitReady(client);
    const staging = h.path('mnt', 'staging');
    const target = h.path('mnt', 'target');
    fs.mkdirSync(staging, { recursive: true });
    const volumeId = (await client.createVolume({ name: 'linked', volumeCapabilities: [RW] })).volume!.volumeId;
    await client.nodeGetCapabilities();
    await client.nodeStageVolume({ volumeId, stagingTargetPath: staging, volumeCapability: RW });
    await client.nodeStageVolume({ volumeId, stagingTargetPath: staging, volumeCapability: RW });
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: target, volumeCapability: RW });
    fs.writeFileSync(path.join(target, 'keep.txt'), 'data');
    expect((await failure(client.deleteVolume({ volumeId }))).codeName).toBe('FAILED_PRECONDITION');
    expect(fs.readFileSync(path.join(h.path('real-state'), 'volumes', volumeId, 'keep.txt'), 'utf8')).toBe('data');
    await client.nodeUnpublishVolume({ volumeId, targetPath: target });
    await client.nodeUnstageVolume({ volumeId, stagingTargetPath: staging });
    expect(h.mountsHere()).toEqual([]);
    await client.deleteVolume({ volumeId });
  });
});

describe('hostpath plugin fault switches', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('a hung RPC hits its deadline and the client stays usable', async () => {
    h.spawn(['--hang-rpc', 'NodeGetInfo']);
    const client = h.client({ csiCall: 300 });
    await h.waitReady(client);
    const e = await failure(client.nodeGetInfo());
    expect(e.codeName).toBe('DEADLINE_EXCEEDED');
    expect(e.attempts).toBe(1);
    expect(await client.getPluginInfo()).toMatchObject({ name: 'hostpath.csiplug.io' });
  });

  it('a crash gives UNAVAILABLE, and a restarted plugin (stale socket replaced) is reachable with the same client', async () => {
    const first = h.spawn([], { CSIPLUG_HOSTPATH_CRASH_AFTER: '3' });
    const client = h.client({ retry: { maxAttempts: 1 } });
    await h.waitReady(client); // call 1 (or more while it started)
    let err: CSIError | undefined;
    for (let i = 0; i < 5 && !err; i++) {
      err = await client.getPluginInfo().then(
        () => undefined,
        (e: CSIError) => e,
      );
    }
    expect(err?.codeName).toBe('UNAVAILABLE');
    expect(err?.message).toMatch(/not reachable/);
    expect((await first.exited).signal).toBe('SIGKILL');
    expect(fs.existsSync(h.sock)).toBe(true); // left behind by the crash
    h.spawn();
    await h.waitReady(client);
    expect(await client.nodeGetInfo()).toMatchObject({ nodeId: 'node-1' });
  });

  it('a start delay means not listening yet; the client gets UNAVAILABLE, then reaches it', async () => {
    h.spawn(['--start-delay-ms', '400']);
    const client = h.client();
    const e = await failure(client.probe({ retry: { maxAttempts: 1 } }));
    expect(e.codeName).toBe('UNAVAILABLE');
    await h.waitReady(client);
  });

  it('probe reports not-ready for a while, then ready', async () => {
    h.spawn([], { CSIPLUG_HOSTPATH_PROBE_NOT_READY_MS: '600' });
    const client = h.client();
    const first = await client.probe({ timeoutMs: 10_000, retry: { maxAttempts: 1_000, baseDelayMs: 20, maxDelayMs: 50 } });
    expect(first).toEqual({ ready: false });
    await h.waitReady(client);
  });

  it('reads CSI_ENDPOINT from the environment and exits cleanly on SIGINT', async () => {
    const p = h.spawn([], { CSI_ENDPOINT: h.endpoint }, false);
    const client = h.client();
    await h.waitReady(client);
    p.proc.kill('SIGINT');
    expect(await p.exited).toEqual({ code: 0, signal: null });
    expect(fs.existsSync(h.sock)).toBe(false);
  });
});
