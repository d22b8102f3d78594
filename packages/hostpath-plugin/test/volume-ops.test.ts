// Expansion, quota stats, snapshots, restores, clones, published nodes and
// topology of the real hostpath plugin process over its unix socket, with
// real bind mounts and real tar archives. Every test unmounts what it
// mounted and stops what it started (Harness.cleanup).
import { createHash, randomBytes } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  CSIError,
  type GrpcCSIClient,
  controllerCapabilitiesFrom,
  mountCapability,
  nodeCapabilitiesFrom,
  pluginCapabilitiesFrom,
} from '@csiplug/csi';
import { Harness } from './harness';

jest.setTimeout(60_000);

const RW = mountCapability('SINGLE_NODE_WRITER');
const MiB = 1 << 20;

async function failure(p: Promise<unknown>): Promise<CSIError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof CSIError)) throw new Error(`expected a CSIError, got ${String(e)}`);
  return e;
}

/** Every entry below `dir` (not `dir` itself): kind, permission bits, content hash or link target, mtime in whole seconds for files. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string) => {
    for (const name of fs.readdirSync(d).sort()) {
      const p = path.join(d, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = fs.lstatSync(p);
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isSymbolicLink()) out[r] = `link -> ${fs.readlinkSync(p)}`;
      else if (st.isDirectory()) {
        out[r] = `dir ${mode}`;
        walk(p, r);
      } else
        out[r] =
          `file ${mode} ${st.size} ${createHash('sha256').update(fs.readFileSync(p)).digest('hex')} ${Math.floor(st.mtimeMs / 1000)}`;
    }
  };
  walk(dir, '');
  return out;
}

/** Some files of every kind in `dir`: nested directories, odd modes, binary data, a symlink, an empty file. */
function fill(dir: string): void {
  fs.mkdirSync(path.join(dir, 'a', 'b'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'hello.txt'), 'hello from the source volume\n');
  fs.writeFileSync(path.join(dir, 'a', 'b', 'blob.bin'), randomBytes(200_000));
  fs.writeFileSync(path.join(dir, 'a', 'secret'), 'only the owner reads this');
  fs.chmodSync(path.join(dir, 'a', 'secret'), 0o600);
  fs.writeFileSync(path.join(dir, 'empty'), '');
  fs.symlinkSync('a/b/blob.bin', path.join(dir, 'link-to-blob'));
  fs.chmodSync(path.join(dir, 'a', 'b'), 0o750);
}

function bytesOf(stats: { usage: Array<{ unit: string; total: string; used: string; available: string }> }) {
  const b = stats.usage.find((u) => u.unit === 'BYTES')!;
  return { total: BigInt(b.total), used: BigInt(b.used), available: BigInt(b.available) };
}

describe('hostpath plugin: expansion, stats, snapshots, clones, published nodes', () => {
  let h: Harness;
  let client: GrpcCSIClient;
  /** The state dir as the kernel sees it: volume backing dirs are below. */
  let state: string;

  beforeEach(async () => {
    h = new Harness();
    h.spawn();
    client = h.client();
    await h.waitReady(client);
    state = fs.realpathSync(h.stateDir);
  });
  afterEach(async () => {
    await h.cleanup();
  });

  const backing = (volumeId: string) => path.join(state, 'volumes', volumeId);

  async function stageAndPublish(volumeId: string, name: string): Promise<{ staging: string; target: string }> {
    const staging = h.path('staging', name);
    const target = h.path('pods', name, 'vol');
    fs.mkdirSync(staging, { recursive: true });
    await client.nodeStageVolume({ volumeId, stagingTargetPath: staging, volumeCapability: RW });
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: target, volumeCapability: RW });
    return { staging, target };
  }

  async function unpublishAndUnstage(volumeId: string, at: { staging: string; target: string }): Promise<void> {
    await client.nodeUnpublishVolume({ volumeId, targetPath: at.target });
    await client.nodeUnstageVolume({ volumeId, stagingTargetPath: at.staging });
  }

  it('advertises exactly what it offers', async () => {
    expect(pluginCapabilitiesFrom(await client.getPluginCapabilities())).toEqual({
      controllerService: true,
      accessibilityConstraints: true,
      groupControllerService: false,
      onlineExpansion: true,
      offlineExpansion: false,
    });
    expect((await client.controllerGetCapabilities()).capabilities.map((c) => c.rpc?.type).sort()).toEqual(
      [
        'CLONE_VOLUME',
        'CREATE_DELETE_SNAPSHOT',
        'CREATE_DELETE_VOLUME',
        'EXPAND_VOLUME',
        'GET_CAPACITY',
        'GET_VOLUME',
        'LIST_SNAPSHOTS',
        'LIST_VOLUMES',
        'LIST_VOLUMES_PUBLISHED_NODES',
        'SINGLE_NODE_MULTI_WRITER',
        'VOLUME_CONDITION',
      ].sort(),
    );
    expect(controllerCapabilitiesFrom(await client.controllerGetCapabilities())).toMatchObject({
      publishUnpublishVolume: false,
      publishReadonly: false,
      modifyVolume: false,
    });
    expect((await client.nodeGetCapabilities()).capabilities.map((c) => c.rpc?.type).sort()).toEqual(
      ['EXPAND_VOLUME', 'GET_VOLUME_STATS', 'SINGLE_NODE_MULTI_WRITER', 'STAGE_UNSTAGE_VOLUME', 'VOLUME_CONDITION'].sort(),
    );
  });

  it('expands a published volume on the controller and the node: stats show the new total, a smaller request changes nothing', async () => {
    const volumeId = (await client.createVolume({ name: 'grow', capacityRange: { requiredBytes: MiB }, volumeCapabilities: [RW] })).volume!
      .volumeId;
    await client.nodeGetCapabilities();
    const at = await stageAndPublish(volumeId, 'grow');
    fs.writeFileSync(path.join(at.target, 'data'), randomBytes(1000));

    expect(bytesOf(await client.nodeGetVolumeStats({ volumeId, volumePath: at.target }))).toEqual({
      total: BigInt(MiB),
      used: 1000n,
      available: BigInt(MiB - 1000),
    });

    expect(await client.controllerExpandVolume({ volumeId, capacityRange: { requiredBytes: 4 * MiB } })).toEqual({
      capacityBytes: String(4 * MiB),
      nodeExpansionRequired: true,
    });
    // idempotent
    expect(await client.controllerExpandVolume({ volumeId, capacityRange: { requiredBytes: 4 * MiB } })).toEqual({
      capacityBytes: String(4 * MiB),
      nodeExpansionRequired: true,
    });
    expect(
      await client.nodeExpandVolume({
        volumeId,
        volumePath: at.target,
        stagingTargetPath: at.staging,
        capacityRange: { requiredBytes: 4 * MiB },
        volumeCapability: RW,
      }),
    ).toEqual({
      capacityBytes: String(4 * MiB),
    });
    // the staging path shows the volume too
    expect((await client.nodeExpandVolume({ volumeId, volumePath: at.staging })).capacityBytes).toBe(String(4 * MiB));

    const stats = bytesOf(await client.nodeGetVolumeStats({ volumeId, volumePath: at.target }));
    expect(stats).toEqual({ total: BigInt(4 * MiB), used: 1000n, available: BigInt(4 * MiB - 1000) });

    // a shrink is no shrink: success at the current size
    expect(await client.controllerExpandVolume({ volumeId, capacityRange: { requiredBytes: 2 * MiB } })).toEqual({
      capacityBytes: String(4 * MiB),
      nodeExpansionRequired: true,
    });
    const listed = (await client.listVolumes()).entries.find((e) => e.volume!.volumeId === volumeId)!;
    expect(listed.volume!.capacityBytes).toBe(String(4 * MiB));
    expect((await client.controllerGetVolume({ volumeId })).volume!.capacityBytes).toBe(String(4 * MiB));

    // the node has nothing beyond what the controller recorded
    expect(
      (await failure(client.nodeExpandVolume({ volumeId, volumePath: at.target, capacityRange: { requiredBytes: 8 * MiB } }))).codeName,
    ).toBe('OUT_OF_RANGE');
    // the node checks the paths it is given
    expect((await failure(client.nodeExpandVolume({ volumeId, volumePath: h.path('nowhere') }))).codeName).toBe('NOT_FOUND');
    fs.mkdirSync(h.path('elsewhere'));
    expect((await failure(client.nodeExpandVolume({ volumeId, volumePath: h.path('elsewhere') }))).codeName).toBe('NOT_FOUND');
    expect(
      (await failure(client.nodeExpandVolume({ volumeId, volumePath: at.target, stagingTargetPath: h.path('elsewhere') }))).codeName,
    ).toBe('NOT_FOUND');
    expect((await failure(client.nodeExpandVolume({ volumeId: 'no-such-volume', volumePath: at.target }))).codeName).toBe('NOT_FOUND');

    expect(fs.readFileSync(path.join(backing(volumeId), 'data')).length).toBe(1000);
    await unpublishAndUnstage(volumeId, at);
    expect(h.mountsHere()).toEqual([]);
  });

  it('measures the files against the capacity: over it, the volume condition is abnormal', async () => {
    const volumeId = (await client.createVolume({ name: 'quota', capacityRange: { requiredBytes: 4096 }, volumeCapabilities: [RW] }))
      .volume!.volumeId;
    await client.nodeGetCapabilities();
    const at = await stageAndPublish(volumeId, 'quota');
    fs.writeFileSync(path.join(at.target, 'small'), Buffer.alloc(3000, 1));
    let stats = await client.nodeGetVolumeStats({ volumeId, volumePath: at.target, stagingTargetPath: at.staging });
    expect(bytesOf(stats)).toEqual({ total: 4096n, used: 3000n, available: 1096n });
    expect(stats.volumeCondition).toMatchObject({ abnormal: false });
    expect(BigInt(stats.usage.find((u) => u.unit === 'INODES')!.total)).toBeGreaterThan(0n);

    fs.mkdirSync(path.join(at.target, 'sub'));
    fs.writeFileSync(path.join(at.target, 'sub', 'big'), Buffer.alloc(5000, 2));
    fs.linkSync(path.join(at.target, 'sub', 'big'), path.join(at.target, 'hardlink-to-big')); // counted once
    fs.symlinkSync('sub/big', path.join(at.target, 'symlink-to-big')); // not followed
    stats = await client.nodeGetVolumeStats({ volumeId, volumePath: at.target });
    expect(bytesOf(stats)).toEqual({ total: 4096n, used: 8000n, available: 0n });
    expect(stats.volumeCondition).toEqual({
      abnormal: true,
      message: `volume "${volumeId}" uses 8000 bytes, over its capacity of 4096 bytes`,
    });

    // expanded past what it holds: normal again
    await client.controllerExpandVolume({ volumeId, capacityRange: { requiredBytes: 10_000 } });
    stats = await client.nodeGetVolumeStats({ volumeId, volumePath: at.target });
    expect(bytesOf(stats)).toEqual({ total: 10_000n, used: 8000n, available: 2000n });
    expect(stats.volumeCondition).toMatchObject({ abnormal: false });
    await unpublishAndUnstage(volumeId, at);
  });

  it('snapshots: create (idempotent by name), list with pages and filters, restore the files as they were, delete idempotently', async () => {
    const a = (await client.createVolume({ name: 'src-a', capacityRange: { requiredBytes: MiB }, volumeCapabilities: [RW] })).volume!
      .volumeId;
    const b = (await client.createVolume({ name: 'src-b', capacityRange: { requiredBytes: 2 * MiB }, volumeCapabilities: [RW] })).volume!
      .volumeId;
    fill(backing(a));
    fs.writeFileSync(path.join(backing(b), 'b.txt'), 'volume b');
    const before = tree(backing(a));
    const t0 = Math.floor(Date.now() / 1000);

    const s1 = (await client.createSnapshot({ name: 'snap-1', sourceVolumeId: a })).snapshot!;
    expect(s1).toMatchObject({ sourceVolumeId: a, readyToUse: true });
    const archive = path.join(state, 'snapshots', `${s1.snapshotId}.tar`);
    expect(fs.statSync(archive).size).toBeGreaterThan(200_000);
    // size_bytes is what a restore must get at least: the source's capacity (the archive holds tar headers too).
    expect(s1.sizeBytes).toBe(String(MiB));
    expect(Number(s1.creationTime!.seconds)).toBeGreaterThanOrEqual(t0 - 1);
    expect(Number(s1.creationTime!.seconds)).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
    expect(s1.creationTime!.nanos).toBeGreaterThanOrEqual(0);
    expect(s1.creationTime!.nanos).toBeLessThan(1e9);
    // same name, same source: the same snapshot; another source: ALREADY_EXISTS
    expect((await client.createSnapshot({ name: 'snap-1', sourceVolumeId: a })).snapshot).toEqual(s1);
    expect((await failure(client.createSnapshot({ name: 'snap-1', sourceVolumeId: b }))).codeName).toBe('ALREADY_EXISTS');

    // the source changes after the snapshot; the snapshot keeps what was
    fs.writeFileSync(path.join(backing(a), 'hello.txt'), 'changed later');
    fs.writeFileSync(path.join(backing(a), 'new-file'), 'added later');
    const s2 = (await client.createSnapshot({ name: 'snap-2', sourceVolumeId: a })).snapshot!;
    const s3 = (await client.createSnapshot({ name: 'snap-3', sourceVolumeId: b })).snapshot!;

    // pages of one over three snapshots
    const seen: string[] = [];
    let token = '';
    for (let i = 0; i < 5; i++) {
      const p = await client.listSnapshots({ maxEntries: 1, startingToken: token });
      expect(p.entries).toHaveLength(1);
      seen.push(p.entries[0].snapshot!.snapshotId);
      token = p.nextToken;
      if (!token) break;
    }
    expect(seen).toEqual([s1.snapshotId, s2.snapshotId, s3.snapshotId]);
    expect((await client.listSnapshots()).entries.map((e) => e.snapshot)).toEqual([s1, s2, s3]);
    expect((await failure(client.listSnapshots({ startingToken: 'not-a-token' }))).codeName).toBe('ABORTED');
    expect((await failure(client.listSnapshots({ startingToken: '99' }))).codeName).toBe('ABORTED');
    // filters
    expect((await client.listSnapshots({ snapshotId: s2.snapshotId })).entries.map((e) => e.snapshot!.snapshotId)).toEqual([s2.snapshotId]);
    expect((await client.listSnapshots({ snapshotId: 'no-such-snapshot' })).entries).toEqual([]);
    expect((await client.listSnapshots({ sourceVolumeId: a })).entries.map((e) => e.snapshot!.snapshotId)).toEqual([
      s1.snapshotId,
      s2.snapshotId,
    ]);
    expect((await client.listSnapshots({ sourceVolumeId: b })).entries.map((e) => e.snapshot!.snapshotId)).toEqual([s3.snapshotId]);
    expect((await client.listSnapshots({ sourceVolumeId: b, snapshotId: s1.snapshotId })).entries).toEqual([]);
    expect((await client.listSnapshots({ sourceVolumeId: 'no-such-volume' })).entries).toEqual([]);
    const byA = await client.listSnapshots({ sourceVolumeId: a, maxEntries: 1 });
    expect(byA.entries.map((e) => e.snapshot!.snapshotId)).toEqual([s1.snapshotId]);
    expect(
      (await client.listSnapshots({ sourceVolumeId: a, maxEntries: 1, startingToken: byA.nextToken })).entries.map(
        (e) => e.snapshot!.snapshotId,
      ),
    ).toEqual([s2.snapshotId]);

    // restore: a new volume with the files as they were at snap-1, at least the source's capacity
    const restored = (
      await client.createVolume({
        name: 'restored',
        volumeCapabilities: [RW],
        volumeContentSource: { snapshot: { snapshotId: s1.snapshotId } },
      })
    ).volume!;
    expect(restored.capacityBytes).toBe(String(MiB));
    expect(restored.contentSource).toMatchObject({ snapshot: { snapshotId: s1.snapshotId } });
    expect(tree(backing(restored.volumeId))).toEqual(before);
    expect(tree(backing(a))).not.toEqual(before);
    expect(fs.statSync(backing(restored.volumeId)).mode & 0o777).toBe(0o777);
    // more than the source had is granted
    const bigger = (
      await client.createVolume({
        name: 'restored-bigger',
        capacityRange: { requiredBytes: 3 * MiB },
        volumeCapabilities: [RW],
        volumeContentSource: { snapshot: { snapshotId: s1.snapshotId } },
      })
    ).volume!;
    expect(bigger.capacityBytes).toBe(String(3 * MiB));
    // idempotent by name and source
    const again = (
      await client.createVolume({
        name: 'restored',
        volumeCapabilities: [RW],
        volumeContentSource: { snapshot: { snapshotId: s1.snapshotId } },
      })
    ).volume!;
    expect(again.volumeId).toBe(restored.volumeId);
    expect(
      (
        await failure(
          client.createVolume({
            name: 'restored',
            volumeCapabilities: [RW],
            volumeContentSource: { snapshot: { snapshotId: s2.snapshotId } },
          }),
        )
      ).codeName,
    ).toBe('ALREADY_EXISTS');
    expect((await failure(client.createVolume({ name: 'restored', volumeCapabilities: [RW] }))).codeName).toBe('ALREADY_EXISTS');
    expect(
      (await failure(client.createVolume({ name: 'restored', volumeCapabilities: [RW], volumeContentSource: { volume: { volumeId: a } } })))
        .codeName,
    ).toBe('ALREADY_EXISTS');
    // a limit below the source's capacity cannot be met
    expect(
      (
        await failure(
          client.createVolume({
            name: 'too-small',
            capacityRange: { limitBytes: MiB / 2 },
            volumeCapabilities: [RW],
            volumeContentSource: { snapshot: { snapshotId: s1.snapshotId } },
          }),
        )
      ).codeName,
    ).toBe('OUT_OF_RANGE');
    expect(
      (
        await failure(
          client.createVolume({
            name: 'from-nothing',
            volumeCapabilities: [RW],
            volumeContentSource: { snapshot: { snapshotId: 'no-such-snapshot' } },
          }),
        )
      ).codeName,
    ).toBe('NOT_FOUND');

    // delete: archive and record go; again, and an unknown id, succeed
    await client.deleteSnapshot({ snapshotId: s1.snapshotId });
    expect(fs.existsSync(archive)).toBe(false);
    await client.deleteSnapshot({ snapshotId: s1.snapshotId });
    await client.deleteSnapshot({ snapshotId: 'no-such-snapshot' });
    expect((await client.listSnapshots()).entries.map((e) => e.snapshot!.snapshotId)).toEqual([s2.snapshotId, s3.snapshotId]);
    expect(
      (
        await failure(
          client.createVolume({ name: 'late', volumeCapabilities: [RW], volumeContentSource: { snapshot: { snapshotId: s1.snapshotId } } }),
        )
      ).codeName,
    ).toBe('NOT_FOUND');
    // the restored volume is its own
    expect(tree(backing(restored.volumeId))).toEqual(before);
    // the source volume can go while its snapshots stay; they restore still
    await client.deleteVolume({ volumeId: b });
    const fromB = (
      await client.createVolume({
        name: 'from-b',
        volumeCapabilities: [RW],
        volumeContentSource: { snapshot: { snapshotId: s3.snapshotId } },
      })
    ).volume!;
    expect(fromB.capacityBytes).toBe(String(2 * MiB));
    expect(fs.readFileSync(path.join(backing(fromB.volumeId), 'b.txt'), 'utf8')).toBe('volume b');

    // snapshots are kept across a restart
    const [first] = (h as unknown as { procs: Array<{ proc: ChildProcess; exited: Promise<unknown> }> }).procs;
    first.proc.kill('SIGTERM');
    await first.exited;
    h.spawn();
    await h.waitReady(client);
    expect((await client.listSnapshots()).entries.map((e) => e.snapshot)).toEqual([s2, s3]);
  });

  it('a restore that fails leaves no half volume', async () => {
    const a = (await client.createVolume({ name: 'src', volumeCapabilities: [RW] })).volume!.volumeId;
    fill(backing(a));
    const snap = (await client.createSnapshot({ name: 'to-break', sourceVolumeId: a })).snapshot!;
    fs.writeFileSync(path.join(state, 'snapshots', `${snap.snapshotId}.tar`), randomBytes(10_000)); // not a tar archive any more
    const before = fs.readdirSync(path.join(state, 'volumes')).sort();
    const e = await failure(
      client.createVolume({ name: 'broken', volumeCapabilities: [RW], volumeContentSource: { snapshot: { snapshotId: snap.snapshotId } } }),
    );
    expect(e.codeName).toBe('INTERNAL');
    expect(e.message).toMatch(/restore snapshot/);
    expect(fs.readdirSync(path.join(state, 'volumes')).sort()).toEqual(before);
    expect((await client.listVolumes()).entries.map((x) => x.volume!.volumeId)).toEqual([a]);
    // a good archive under the same name works afterwards
    await client.deleteSnapshot({ snapshotId: snap.snapshotId });
    const good = (await client.createSnapshot({ name: 'good', sourceVolumeId: a })).snapshot!;
    const vol = (
      await client.createVolume({
        name: 'broken',
        volumeCapabilities: [RW],
        volumeContentSource: { snapshot: { snapshotId: good.snapshotId } },
      })
    ).volume!;
    expect(tree(backing(vol.volumeId))).toEqual(tree(backing(a)));
  });

  it('clones a volume: the same files in a copy of its own, at least the source capacity', async () => {
    const src = (await client.createVolume({ name: 'original', capacityRange: { requiredBytes: 2 * MiB }, volumeCapabilities: [RW] }))
      .volume!.volumeId;
    fill(backing(src));
    const clone = (
      await client.createVolume({
        name: 'copy',
        capacityRange: { requiredBytes: MiB },
        volumeCapabilities: [RW],
        volumeContentSource: { volume: { volumeId: src } },
      })
    ).volume!;
    expect(clone.capacityBytes).toBe(String(2 * MiB));
    expect(clone.contentSource).toMatchObject({ volume: { volumeId: src } });
    expect(tree(backing(clone.volumeId))).toEqual(tree(backing(src)));
    expect(
      (
        await client.createVolume({
          name: 'copy',
          capacityRange: { requiredBytes: MiB },
          volumeCapabilities: [RW],
          volumeContentSource: { volume: { volumeId: src } },
        })
      ).volume!.volumeId,
    ).toBe(clone.volumeId);
    fs.writeFileSync(path.join(backing(clone.volumeId), 'hello.txt'), 'only in the clone');
    expect(fs.readFileSync(path.join(backing(src), 'hello.txt'), 'utf8')).toBe('hello from the source volume\n');
    // listed with its source
    const listed = (await client.listVolumes()).entries.find((e) => e.volume!.volumeId === clone.volumeId)!;
    expect(listed.volume!.contentSource).toMatchObject({ volume: { volumeId: src } });
    expect(
      (
        await failure(
          client.createVolume({
            name: 'copy-2',
            volumeCapabilities: [RW],
            volumeContentSource: { volume: { volumeId: 'no-such-volume' } },
          }),
        )
      ).codeName,
    ).toBe('NOT_FOUND');
    expect(
      (
        await failure(
          client.createVolume({
            name: 'copy-3',
            capacityRange: { limitBytes: MiB },
            volumeCapabilities: [RW],
            volumeContentSource: { volume: { volumeId: src } },
          }),
        )
      ).codeName,
    ).toBe('OUT_OF_RANGE');
    expect(fs.readdirSync(path.join(state, 'volumes')).sort()).toEqual([src, clone.volumeId].sort());
  });

  it('ListVolumes and ControllerGetVolume report the nodes a volume is published on, after publish, restart and unpublish', async () => {
    const volumeId = (await client.createVolume({ name: 'pub', volumeCapabilities: [RW] })).volume!.volumeId;
    const status = async () => (await client.listVolumes()).entries.find((e) => e.volume!.volumeId === volumeId)!.status;
    expect(await status()).toEqual({ publishedNodeIds: [], volumeCondition: expect.objectContaining({ abnormal: false }) });
    await client.nodeGetCapabilities();
    const at = await stageAndPublish(volumeId, 'pub');
    const second = h.path('pods', 'second', 'vol');
    await client.nodePublishVolume({ volumeId, stagingTargetPath: at.staging, targetPath: second, volumeCapability: RW });
    expect((await status())!.publishedNodeIds).toEqual(['node-1']);
    expect((await client.controllerGetVolume({ volumeId })).status).toEqual({
      publishedNodeIds: ['node-1'],
      volumeCondition: expect.objectContaining({ abnormal: false }),
    });

    // persisted: a restarted plugin still knows
    const [first] = (h as unknown as { procs: Array<{ proc: ChildProcess; exited: Promise<unknown> }> }).procs;
    first.proc.kill('SIGTERM');
    await first.exited;
    h.spawn();
    await h.waitReady(client);
    expect((await status())!.publishedNodeIds).toEqual(['node-1']);

    await client.nodeUnpublishVolume({ volumeId, targetPath: at.target });
    expect((await status())!.publishedNodeIds).toEqual(['node-1']); // still at the second target
    await client.nodeUnpublishVolume({ volumeId, targetPath: second });
    expect((await status())!.publishedNodeIds).toEqual([]);
    await client.nodeUnstageVolume({ volumeId, stagingTargetPath: at.staging });
    expect(h.mountsHere()).toEqual([]);
    // pagination is kept
    await client.createVolume({ name: 'pub-2', volumeCapabilities: [RW] });
    const p1 = await client.listVolumes({ maxEntries: 1 });
    expect(p1.entries).toHaveLength(1);
    expect((await client.listVolumes({ maxEntries: 1, startingToken: p1.nextToken })).entries).toHaveLength(1);
    // the controller's view of the condition: the backing directory is gone
    fs.rmSync(backing(volumeId), { recursive: true });
    expect((await status())!.volumeCondition).toMatchObject({ abnormal: true });
  });

  it('answers bad input with the code the CSI spec names', async () => {
    const volumeId = (await client.createVolume({ name: 'v', capacityRange: { requiredBytes: 1000 }, volumeCapabilities: [RW] })).volume!
      .volumeId;
    // past the client's own checks, straight to the plugin
    expect((await h.raw('controller', 'CreateSnapshot', { sourceVolumeId: volumeId })).code).toBe('INVALID_ARGUMENT');
    expect((await h.raw('controller', 'CreateSnapshot', { name: 's' })).code).toBe('INVALID_ARGUMENT');
    expect((await h.raw('controller', 'DeleteSnapshot', {})).code).toBe('INVALID_ARGUMENT');
    expect((await h.raw('controller', 'ControllerExpandVolume', { volumeId })).code).toBe('INVALID_ARGUMENT');
    expect((await h.raw('controller', 'ControllerExpandVolume', { capacityRange: { requiredBytes: 5 } })).code).toBe('INVALID_ARGUMENT');
    expect((await h.raw('controller', 'ControllerGetVolume', {})).code).toBe('INVALID_ARGUMENT');
    expect((await h.raw('node', 'NodeExpandVolume', { volumeId })).code).toBe('INVALID_ARGUMENT');
    expect(
      (
        await h.raw('controller', 'CreateVolume', {
          name: 'empty-src',
          volumeCapabilities: [RW],
          volumeContentSource: { snapshot: { snapshotId: '' } },
        })
      ).code,
    ).toBe('INVALID_ARGUMENT');
    expect(
      (
        await h.raw('controller', 'CreateVolume', {
          name: 'empty-src',
          volumeCapabilities: [RW],
          volumeContentSource: { volume: { volumeId: '' } },
        })
      ).code,
    ).toBe('INVALID_ARGUMENT');
    expect((await h.raw('controller', 'ListSnapshots', { maxEntries: -1 })).code).toBe('INVALID_ARGUMENT');
    // through the client
    expect((await failure(client.createSnapshot({ name: 's', sourceVolumeId: 'no-such-volume' }))).codeName).toBe('NOT_FOUND');
    expect(
      (await failure(client.controllerExpandVolume({ volumeId, capacityRange: { requiredBytes: 5000, limitBytes: 4000 } }))).codeName,
    ).toBe('OUT_OF_RANGE');
    expect(
      (await failure(client.controllerExpandVolume({ volumeId: 'no-such-volume', capacityRange: { requiredBytes: 5000 } }))).codeName,
    ).toBe('NOT_FOUND');
    expect((await failure(client.controllerExpandVolume({ volumeId, capacityRange: { requiredBytes: -1 } }))).codeName).toBe(
      'INVALID_ARGUMENT',
    );
    expect((await failure(client.controllerGetVolume({ volumeId: 'no-such-volume' }))).codeName).toBe('NOT_FOUND');
    expect((await failure(client.nodeExpandVolume({ volumeId: 'no-such-volume', volumePath: h.path() }))).codeName).toBe('NOT_FOUND');
    expect((await failure(client.nodeExpandVolume({ volumeId, volumePath: 'relative' }))).codeName).toBe('INVALID_ARGUMENT');
    expect(
      (
        await failure(
          client.createVolume({
            name: 'w',
            volumeCapabilities: [RW],
            volumeContentSource: { snapshot: { snapshotId: 'no-such-snapshot' } },
          }),
        )
      ).codeName,
    ).toBe('NOT_FOUND');
    expect(
      (
        await failure(
          client.createVolume({ name: 'w', volumeCapabilities: [RW], volumeContentSource: { volume: { volumeId: 'no-such-volume' } } }),
        )
      ).codeName,
    ).toBe('NOT_FOUND');
    const s = (await client.createSnapshot({ name: 'once', sourceVolumeId: volumeId })).snapshot!;
    const other = (await client.createVolume({ name: 'other', volumeCapabilities: [RW] })).volume!.volumeId;
    expect((await failure(client.createSnapshot({ name: 'once', sourceVolumeId: other }))).codeName).toBe('ALREADY_EXISTS');
    expect((await client.listSnapshots()).entries.map((e) => e.snapshot!.snapshotId)).toEqual([s.snapshotId]);
    // nothing half-made by the refusals
    expect((await client.listVolumes()).entries.map((e) => e.volume!.volumeId).sort()).toEqual([volumeId, other].sort());
    expect(fs.readdirSync(path.join(state, 'snapshots'))).toEqual([`${s.snapshotId}.tar`]);
  });
});

describe('hostpath plugin topology and split deployment', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  const ZONE = 'topology.hostpath.csiplug.io/zone';
  const RACK = 'topology.hostpath.csiplug.io/rack';

  it('--topology and --max-volumes-per-node: NodeGetInfo reports them; CreateVolume outside the topology is RESOURCE_EXHAUSTED', async () => {
    h.spawn(['--topology', `${ZONE}=z1,${RACK}=r7`, '--max-volumes-per-node', '12']);
    const client = h.client();
    await h.waitReady(client);
    const segments = { [ZONE]: 'z1', [RACK]: 'r7' };
    expect(await client.nodeGetInfo()).toEqual({ nodeId: 'node-1', maxVolumesPerNode: '12', accessibleTopology: { segments } });

    const e = await failure(
      client.createVolume({
        name: 'far',
        volumeCapabilities: [RW],
        accessibilityRequirements: { requisite: [{ segments: { [ZONE]: 'z2' } }] },
      }),
    );
    expect(e.codeName).toBe('RESOURCE_EXHAUSTED');
    expect(e.message).toContain(`${ZONE}=z2`);
    expect(e.message).toContain(`${ZONE}=z1, ${RACK}=r7`);
    expect(
      (
        await failure(
          client.createVolume({
            name: 'far',
            volumeCapabilities: [RW],
            accessibilityRequirements: { requisite: [{ segments: { [ZONE]: 'z1', [RACK]: 'r8' } }] },
          }),
        )
      ).codeName,
    ).toBe('RESOURCE_EXHAUSTED');
    expect((await client.listVolumes()).entries).toEqual([]);

    // one requisite segment that holds this node is enough; preferred ones elsewhere are only a preference
    const near = (
      await client.createVolume({
        name: 'near',
        volumeCapabilities: [RW],
        accessibilityRequirements: {
          requisite: [{ segments: { [ZONE]: 'z2' } }, { segments: { [ZONE]: 'z1' } }],
          preferred: [{ segments: { [ZONE]: 'z2' } }],
        },
      })
    ).volume!;
    expect(near.accessibleTopology).toEqual([{ segments }]);
    const anywhere = (
      await client.createVolume({
        name: 'anywhere',
        volumeCapabilities: [RW],
        accessibilityRequirements: { preferred: [{ segments: { [ZONE]: 'z9' } }] },
      })
    ).volume!;
    expect(anywhere.accessibleTopology).toEqual([{ segments }]);
    expect((await client.listVolumes()).entries.map((x) => x.volume!.accessibleTopology)).toEqual([[{ segments }], [{ segments }]]);
    expect((await client.getCapacity({ accessibleTopology: { segments: { [ZONE]: 'z2' } } })).availableCapacity).toBe('0');
    expect(BigInt((await client.getCapacity({ accessibleTopology: { segments: { [RACK]: 'r7' } } })).availableCapacity)).toBeGreaterThan(
      0n,
    );
  });

  it('reads the topology and the volume limit from the environment', async () => {
    h.spawn([], { CSIPLUG_HOSTPATH_TOPOLOGY: `${ZONE}=east`, CSIPLUG_HOSTPATH_MAX_VOLUMES_PER_NODE: '3' });
    const client = h.client();
    await h.waitReady(client);
    expect(await client.nodeGetInfo()).toEqual({
      nodeId: 'node-1',
      maxVolumesPerNode: '3',
      accessibleTopology: { segments: { [ZONE]: 'east' } },
    });
  });

  it('refuses a bad --topology at start, naming the flag', async () => {
    const p = h.spawn(['--topology', `${ZONE}=has space`]);
    expect((await p.exited).code).toBe(2);
    expect(p.stderr()).toContain('--topology');
    expect(p.stderr()).toContain('has space');
  });

  it('node mode has no controller service; a controller and a node process sharing the state dir agree on published nodes, attachments included', async () => {
    const controllerEndpoint = `unix://${h.path('controller.sock')}`;
    h.spawn(['--mode', 'controller', '--endpoint', controllerEndpoint, '--controller-publish', 'true']);
    h.spawn(['--mode', 'node', '--node-id', 'node-2']);
    const controller = h.client({ endpoint: controllerEndpoint });
    const node = h.client();
    await h.waitReady(controller);
    await h.waitReady(node);

    expect(pluginCapabilitiesFrom(await node.getPluginCapabilities())).toMatchObject({ controllerService: false, onlineExpansion: true });
    expect((await failure(node.controllerGetCapabilities())).codeName).toBe('UNIMPLEMENTED');
    expect(nodeCapabilitiesFrom(await node.nodeGetCapabilities())).toMatchObject({ expandVolume: true, stageUnstageVolume: true });
    expect(pluginCapabilitiesFrom(await controller.getPluginCapabilities())).toMatchObject({
      controllerService: true,
      onlineExpansion: true,
    });
    expect((await failure(controller.nodeGetCapabilities())).codeName).toBe('UNIMPLEMENTED');
    expect(controllerCapabilitiesFrom(await controller.controllerGetCapabilities())).toMatchObject({
      publishUnpublishVolume: true,
      listVolumesPublishedNodes: true,
      expandVolume: true,
    });

    const volumeId = (await controller.createVolume({ name: 'shared', capacityRange: { requiredBytes: MiB }, volumeCapabilities: [RW] }))
      .volume!.volumeId;
    await controller.controllerPublishVolume({ volumeId, nodeId: 'node-9', volumeCapability: RW });
    const published = async () => (await controller.listVolumes()).entries[0].status!.publishedNodeIds;
    expect(await published()).toEqual(['node-9']);

    const staging = h.path('staging', 'shared');
    const target = h.path('pods', 'shared', 'vol');
    fs.mkdirSync(staging, { recursive: true });
    await node.nodeStageVolume({ volumeId, stagingTargetPath: staging, volumeCapability: RW });
    await node.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: target, volumeCapability: RW });
    expect(await published()).toEqual(['node-2', 'node-9']);

    // expansion across the two processes
    expect((await controller.controllerExpandVolume({ volumeId, capacityRange: { requiredBytes: 3 * MiB } })).capacityBytes).toBe(
      String(3 * MiB),
    );
    expect((await node.nodeExpandVolume({ volumeId, volumePath: target, capacityRange: { requiredBytes: 3 * MiB } })).capacityBytes).toBe(
      String(3 * MiB),
    );
    expect(bytesOf(await node.nodeGetVolumeStats({ volumeId, volumePath: target })).total).toBe(BigInt(3 * MiB));

    await node.nodeUnpublishVolume({ volumeId, targetPath: target });
    await node.nodeUnstageVolume({ volumeId, stagingTargetPath: staging });
    expect(await published()).toEqual(['node-9']);
    await controller.controllerUnpublishVolume({ volumeId, nodeId: 'node-9' });
    expect(await published()).toEqual([]);
    expect(h.mountsHere()).toEqual([]);
  });
});
