// The volume operations users run every week, end to end against the real
// hostpath plugin (real gRPC over its unix socket, real bind mounts, real
// tar archives): expand (controller and node, online, while a workload
// writes), snapshot → restore → the same bytes, clone, the plugin's own
// volumes a page at a time, usage in `volume status` and `alloc status`,
// register checked with the plugin, detach, topology and
// max_volumes_per_node refusals at claim time, and the claim sweep.
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { promisify } from 'util';
import { openClientState } from '@csiplug/state';
import { hostpathPluginJobHcl, workloadJobHcl } from '../src/commands/specs';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { AgentHarness, BIN, isAlive, mountsUnder, pollUntil } from './support/agent-process';

jest.setTimeout(180_000);

const run = promisify(execFile);
const MiB = 1024 * 1024;

/** A volume file: `extra` lines are added as they are. */
function volumeFile(id: string, extra = ''): string {
  return `id = "${id}"
type = "csi"
plugin_id = "hostpath"
capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}
${extra}
`;
}

describe('volume operations against the real hostpath plugin', () => {
  let h: AgentHarness;

  const startWithPlugin = async (extraArgs: string[] = [], config = '') => {
    h.extraConfig = config;
    await h.start();
    await h.api.runJob(jobToNomadJson(await parseJobspec(hostpathPluginJobHcl({ restartDelay: '100ms', extraArgs }), 'plugin.hcl')));
    await pollUntil('plugin hostpath healthy', async () => {
      const p = await h.api.getPlugin('hostpath').catch(() => undefined);
      return p && p.nodesHealthy === 1 && p.controllersHealthy === 1 ? p : undefined;
    });
  };
  const create = async (id: string, extra = '') =>
    h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeFile(id, extra), `${id}.hcl`)));
  const register = async (id: string, extra: string) =>
    h.api.registerVolume(volumeSpecToDocument(await parseVolumeSpec(volumeFile(id, extra), `${id}.hcl`)));
  /** Runs a workload on the volume that writes its alloc id (and `script`), then sleeps; resolves with its alloc once it runs. */
  const workload = async (name: string, volumeId: string, script = '') => {
    const { allocIds } = await h.api.runJob(
      jobToNomadJson(
        await parseJobspec(
          workloadJobHcl(
            `work-${name}`,
            volumeId,
            `${script}${script ? ' && ' : ''}echo "$CSIPLUG_ALLOC_ID" > "$CSIPLUG_VOLUME_DATA/owner.txt" && exec sleep 3600`,
          ),
          `${name}.hcl`,
        ),
      ),
    );
    return allocIds[0]!;
  };
  const running = (id: string) =>
    pollUntil(`alloc ${id} running with its volume`, async () => {
      const a = await h.api.getAlloc(id);
      if (a.clientStatus === 'failed') throw new Error(`alloc ${id} failed: ${JSON.stringify(a.tasks)}`);
      return a.clientStatus === 'running' && a.volumes['data'] && fs.existsSync(path.join(a.volumes['data'].hostPath, 'owner.txt'))
        ? a
        : undefined;
    });
  const failedWith = (id: string) =>
    pollUntil(`alloc ${id} failed`, async () => {
      const a = await h.api.getAlloc(id);
      return a.clientStatus === 'failed' ? Object.values(a.tasks).flatMap((t) => t.events.map((e) => e.message)) : undefined;
    });
  const refusal = async (p: Promise<unknown>): Promise<{ status: number; message: string }> => {
    try {
      await p;
    } catch (err) {
      return { status: (err as { status: number }).status, message: (err as Error).message };
    }
    throw new Error('expected a refusal');
  };
  /** The plugin's own directory of a volume (its state dir is the plugin's data dir). */
  const backingDir = (externalId: string) => path.join(h.dataDir, 'plugin-data', 'hostpath', 'state', 'volumes', externalId);
  const cli = async (args: string[]) => {
    try {
      const { stdout } = await run(process.execPath, [BIN, ...args, '-address', `http://127.0.0.1:${h.port}`], { timeout: 60_000 });
      return stdout;
    } catch (err) {
      throw new Error(`csiplug ${args.join(' ')} failed: ${(err as { stderr?: string }).stderr ?? String(err)}`);
    }
  };

  beforeEach(() => {
    h = new AgentHarness();
  });
  afterEach(async () => {
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual([]);
  });

  it('the plugin stopped while its workload is still stopping waits for the unmount (nomad#11614): nothing stays staged or claimed; said on the plugin alloc', async () => {
    await startWithPlugin();
    await create('drained');
    // A workload that takes a while to stop (SIGTERM → 4 s of shutdown, under the 5 s kill_timeout): its unmount comes after that.
    const script = `trap 'kill $! 2>/dev/null; sleep 4; exit 0' TERM; echo "$CSIPLUG_ALLOC_ID" > "$CSIPLUG_VOLUME_DATA/owner.txt"; sleep 3600 & wait`;
    const id = (await h.api.runJob(jobToNomadJson(await parseJobspec(workloadJobHcl('work-drained', 'drained', script), 'drained.hcl'))))
      .allocIds[0]!;
    await running(id);
    const workloadStopped = h.api.stopJob('work-drained');
    await pollUntil('the workload asked to stop', async () => ((await h.api.getAlloc(id)).desiredStatus === 'stop' ? true : undefined));
    const plugin = (await h.api.listAllocs()).find((a) => a.jobId === 'hostpath-plugin')!;
    await h.api.stopJob('hostpath-plugin');
    await workloadStopped;
    // The plugin went only after the workload's unmount: nothing of the volume is left, no unmount is pending.
    const v = await h.api.getVolume('drained');
    expect(v.claims).toEqual([]);
    expect(v.mounts ?? []).toEqual([]);
    expect(mountsUnder(path.join(h.dataDir, 'csi'))).toEqual([]);
    const said = Object.values((await h.api.getAlloc(plugin.id)).tasks).flatMap((t) => t.events.map((e) => `${e.type}: ${e.message}`));
    expect(said.find((e) => e.startsWith('Waiting for unmounts:'))).toMatch(
      /the plugin stops once the unmounts that need it are done \(up to 30s\): drained \(alloc [0-9a-f]{8}\)/,
    );
    expect(said.filter((e) => e.startsWith('Volumes left mounted'))).toEqual([]);
  });

  it('volume status answers at once with what it has when NodeGetVolumeStats hangs, and says the usage is late', async () => {
    await startWithPlugin(['--hang-rpc', 'NodeGetVolumeStats']);
    await create('late');
    await running(await workload('late', 'late'));
    // The plugin never answers: the read says so after its short wait instead of holding the caller for the CSI call limit.
    const [first] = await h.api.volumeUsage('late');
    expect(first).toMatchObject({ volumeId: 'late', late: true });
    expect(first!.error).toMatch(/plugin "hostpath" has not answered NodeGetVolumeStats within 5s: the usage is late/);
    expect(first!.usage).toBeUndefined();
    // Asked again (the CLI this time) while the first call still hangs: the same answer, no call stacked on the plugin.
    const out = await cli(['volume', 'status', 'late']);
    expect(out).toMatch(/usage is late/);
  });

  it('expands a mounted volume online (controller, then node) while its workload runs; usage shows it in volume status and alloc status; a smaller size is refused', async () => {
    await startWithPlugin();
    await create('grow', 'capacity_min = "1MiB"');
    const id = await workload('grow', 'grow', 'head -c 204800 /dev/zero > "$CSIPLUG_VOLUME_DATA/blob"');
    const alloc = await running(id);
    const pid = h.taskPid(id, 'writer');
    let usage = await h.api.volumeUsage('grow');
    expect(usage).toHaveLength(1);
    expect(usage[0]!.usage!.bytes!.total).toBe(MiB);
    expect(usage[0]!.usage!.bytes!.used).toBeGreaterThanOrEqual(204800);

    const grown = await create('grow', 'capacity_min = "3MiB"');
    expect(grown.capacityBytes).toBe(3 * MiB);
    expect(grown.nodeExpansion).toEqual([{ allocId: id, name: 'data', capacityBytes: 3 * MiB }]);
    usage = await h.api.allocUsage(id);
    expect(usage[0]!.usage!.bytes!.total).toBe(3 * MiB);
    // Online: the workload never stopped, its mount and data are where they were.
    expect(h.taskPid(id, 'writer')).toBe(pid);
    expect(isAlive(pid)).toBe(true);
    expect(mountsUnder(alloc.volumes['data']!.hostPath)).toEqual([alloc.volumes['data']!.hostPath]);

    const shrink = await refusal(create('grow', 'capacity_min = "1MiB"\ncapacity_max = "2MiB"'));
    // A create again is Nomad's reconcile (Merge, then expand): Merge refuses the shrink before the plugin is asked.
    expect(shrink.status).toBe(409);
    expect(shrink.message).toContain(`its capacity_max ${2 * MiB} is below the ${3 * MiB} bytes it has: volumes only grow`);
    // The same file again changes nothing (every mount was expanded, but NodeExpandVolume is asked again: it is idempotent).
    const again = await create('grow', 'capacity_min = "3MiB"');
    expect(again.nodeExpansion).toEqual([{ allocId: id, name: 'data', capacityBytes: 3 * MiB }]);
    const restore = await refusal(create('grow', 'capacity_min = "4MiB"\nsnapshot_id = "x"'));
    expect(restore.message).toContain('its snapshot_id cannot change (it is not set, the spec says "x")');
    expect((await h.api.getVolume('grow')).capacityBytes).toBe(3 * MiB);

    // What people read: the CLI's volume status and alloc status show the usage.
    expect(await cli(['volume', 'status', 'grow'])).toMatch(/Capacity\s+= 3.0 MiB[\s\S]*Used[\s\S]*of 3.0 MiB \(\d+%\)/);
    expect(await cli(['alloc', 'status', id])).toMatch(
      /CSI Volumes:\nName\s+Volume ID\s+Plugin ID\s+Read Only\s+Used\s+Host Path\ndata\s+grow\s+hostpath\s+false\s+\S+ \S+ of 3.0 MiB/,
    );
    const plugin = await h.api.getPlugin('hostpath');
    expect(plugin.controller!.info).toMatchObject({
      Snapshots: true,
      'List Snapshots': true,
      Clone: true,
      Expand: true,
      'List Volumes Published Nodes': true,
      'Volume Expansion': 'online',
    });
    expect(plugin.node!.info).toMatchObject({ Expand: true, 'Volume Stats': true, 'Volume Condition': true });
  });

  it("snapshot → volume from the snapshot → the same bytes; a clone too; snapshots and the plugin's volumes listed a page at a time; unknown ids refused with nothing changed", async () => {
    await startWithPlugin();
    const source = await create('src', 'capacity_min = "1MiB"');
    const id = await workload('src', 'src', 'head -c 65536 /dev/urandom > "$CSIPLUG_VOLUME_DATA/random.bin"');
    await running(id);
    const original = fs.readFileSync(path.join(backingDir(source.externalId), 'random.bin'));
    expect(original.length).toBe(65536);

    const snap = await h.api.createSnapshot('src', 'before-upgrade');
    expect(snap).toMatchObject({ pluginId: 'hostpath', externalSourceVolumeId: source.externalId, sourceVolumeId: 'src', ready: true });
    expect(snap.sizeBytes).toBeGreaterThan(65536);
    const snap2 = await h.api.createSnapshot('src', 'second');

    const restored = await create('restored', `snapshot_id = "${snap.id}"`);
    expect(fs.readFileSync(path.join(backingDir(restored.externalId), 'random.bin')).equals(original)).toBe(true);
    const cloned = await create('cloned', `clone_id = "${source.externalId}"`);
    expect(fs.readFileSync(path.join(backingDir(cloned.externalId), 'random.bin')).equals(original)).toBe(true);
    expect(cloned.capacityBytes).toBe(MiB);

    const first = await h.api.listSnapshots({ pluginId: 'hostpath', perPage: 1 });
    expect(first.Snapshots).toHaveLength(1);
    expect(first.NextToken).not.toBe('');
    const second = await h.api.listSnapshots({ pluginId: 'hostpath', perPage: 1, nextToken: first.NextToken });
    expect([...first.Snapshots, ...second.Snapshots].map((s) => s.id).sort()).toEqual([snap.id, snap2.id].sort());
    expect(second.NextToken).toBe('');

    const pages: string[][] = [];
    let token: string | undefined;
    do {
      const page = await h.api.listExternalVolumes({ pluginId: 'hostpath', perPage: 2, ...(token ? { nextToken: token } : {}) });
      pages.push(page.Volumes.map((v) => v.volumeId ?? `?${v.externalId}`));
      token = page.NextToken || undefined;
    } while (token);
    expect(pages.map((p) => p.length)).toEqual([2, 1]);
    expect(pages.flat().sort()).toEqual(['cloned', 'restored', 'src']);
    const listed = (await h.api.listExternalVolumes({ pluginId: 'hostpath' })).Volumes.find((v) => v.volumeId === 'src')!;
    expect(listed.publishedNodeIds).toEqual([expect.any(String)]);

    const unknown = await refusal(create('nope', 'snapshot_id = "no-such-snapshot"'));
    expect(unknown.status).toBe(404);
    expect(unknown.message).toMatch(/could not create volume "nope" on plugin "hostpath".*NOT_FOUND/);
    expect((await h.api.listVolumes()).map((v) => v.id).sort()).toEqual(['cloned', 'restored', 'src']);
    const noSource = await refusal(h.api.createSnapshot('no-such-volume'));
    expect(noSource.status).toBe(404);

    await h.api.deleteSnapshot('hostpath', snap.id);
    await h.api.deleteSnapshot('hostpath', snap.id); // gone already: fine, as CSI says
    expect((await h.api.listSnapshots({ pluginId: 'hostpath' })).Snapshots.map((s) => s.id)).not.toContain(snap.id);
  });

  it('register is checked with the plugin: an external id it does not have, or a capability it cannot serve, is refused and nothing is stored', async () => {
    await startWithPlugin();
    const made = await create('real');
    await h.api.deleteVolume('real').catch(() => undefined);
    const missing = await refusal(register('ghost', `external_id = "${made.externalId}"`));
    expect(missing.status).toBe(400);
    expect(missing.message).toContain(`plugin "hostpath" has no volume with external_id "${made.externalId}"`);
    const kept = await create('kept');
    await h.api.deregisterVolume('kept');
    const wrongMode = await refusal(
      h.api.registerVolume(
        volumeSpecToDocument(
          await parseVolumeSpec(
            `id = "multi"\ntype = "csi"\nplugin_id = "hostpath"\nexternal_id = "${kept.externalId}"\ncapability {\n  access_mode = "multi-node-multi-writer"\n  attachment_mode = "file-system"\n}\n`,
            'm.hcl',
          ),
        ),
      ),
    );
    expect(wrongMode.status).toBe(400);
    expect(wrongMode.message).toMatch(
      /volume "multi": plugin "hostpath" cannot serve it as asked \(multi-node-multi-writer\/file-system\): access mode MULTI_NODE_MULTI_WRITER is not supported/,
    );
    expect((await h.api.listVolumes()).map((v) => v.id)).toEqual([]);
    await register('kept', `external_id = "${kept.externalId}"`);
  });

  it("two volumes with one name get two storages: a write in one is not seen in the other, deleting the second keeps the first's data; a register of a used external id is a 409 naming the first", async () => {
    await startWithPlugin();
    const first = await create('first', 'name = "shared"');
    const second = await create('second', 'name = "shared"');
    expect(second.externalId).not.toBe(first.externalId);
    const id = await workload('first', 'first', 'echo kept > "$CSIPLUG_VOLUME_DATA/mine.txt"');
    await running(id);
    expect(fs.readFileSync(path.join(backingDir(first.externalId), 'mine.txt'), 'utf8')).toBe('kept\n');
    expect(fs.existsSync(path.join(backingDir(second.externalId), 'mine.txt'))).toBe(false);
    await h.api.deleteVolume('second');
    expect(fs.readFileSync(path.join(backingDir(first.externalId), 'mine.txt'), 'utf8')).toBe('kept\n');
    expect(await h.api.getVolume('first')).toMatchObject({ externalId: first.externalId, schedulable: true });

    // The first's plugin volume under another id: refused while claimed and after, naming the first; nothing stored.
    const claimed = await refusal(register('again', `external_id = "${first.externalId}"`));
    expect(claimed.status).toBe(409);
    expect(claimed.message).toBe(
      `volume "again": plugin "hostpath" volume "${first.externalId}" is volume "first" already; use volume "first", or deregister it first`,
    );
    await h.api.stopJob('work-first');
    const unclaimed = await refusal(register('again', `external_id = "${first.externalId}"`));
    expect(unclaimed.status).toBe(409);
    expect(unclaimed.message).toContain('is volume "first" already');
    expect((await h.api.listVolumes()).map((v) => v.id)).toEqual(['first']);
  });

  it('job stop does not wait for a CreateSnapshot that hangs: the claim is released while the snapshot call is still held by the plugin', async () => {
    await startWithPlugin(['--hang-rpc', 'CreateSnapshot']);
    await create('snapped');
    const id = await workload('snapped', 'snapped');
    await running(id);
    const plugin = (await h.api.listAllocs()).find((a) => a.jobId === 'hostpath-plugin')!;
    let snapshotSettled = false;
    const snapshot = h.api.createSnapshot('snapped', 'hung').then(
      () => (snapshotSettled = true),
      () => (snapshotSettled = true),
    );
    // The plugin holds the call (until the CSI call limit, 2 minutes by default)…
    await pollUntil('the plugin holding CreateSnapshot', async () => {
      const said = await Promise.all(
        (['stdout', 'stderr'] as const).map((stream) => h.api.allocLogs(plugin.id, 'plugin', { stream, origin: 'end', offset: 64 * 1024 })),
      );
      return said.some((l) => l.data.includes('hanging on purpose') && l.data.includes('CreateSnapshot')) ? true : undefined;
    });
    // …and the workload's stop, which releases its claim, does not wait for it.
    await h.api.stopJob('work-snapped');
    expect((await h.api.getVolume('snapped')).claims).toEqual([]);
    expect(snapshotSettled).toBe(false);
    void snapshot;
  });

  it("topology: a claim from a node outside the volume's topology is refused naming both; a topology request no node satisfies is refused at create", async () => {
    await startWithPlugin(['--topology', 'rack=r1']);
    const impossible = await refusal(
      create('far', 'topology_request {\n  required {\n    topology {\n      segments = { "rack" = "r9" }\n    }\n  }\n}'),
    );
    expect(impossible.status).toBe(409);
    expect(impossible.message).toMatch(/could not create volume "far" on plugin "hostpath".*RESOURCE_EXHAUSTED/);
    const near = await create(
      'near',
      'topology_request {\n  required {\n    topology {\n      segments = { "rack" = "r1" }\n    }\n  }\n}',
    );
    expect(near.accessibleTopology).toEqual([{ segments: { rack: 'r1' } }]);
    // Registered as reachable from rack r2 only: this node (rack r1) may not claim it.
    await h.api.deregisterVolume('near');
    await register(
      'elsewhere',
      `external_id = "${near.externalId}"\ntopology_request {\n  required {\n    topology {\n      segments = { "rack" = "r2" }\n    }\n  }\n}`,
    );
    const id = await workload('elsewhere', 'elsewhere');
    const events = await failedWith(id);
    expect(events.join('\n')).toMatch(
      /volume "elsewhere" is accessible from topology \{rack=r2\} only; node \S+ of plugin "hostpath" has topology \{rack=r1\}: alloc \S+ cannot claim it here/,
    );
    expect((await h.api.getVolume('elsewhere')).claims).toEqual([]);
  });

  it('max_volumes_per_node is enforced at claim time, with the count and the limit', async () => {
    await startWithPlugin(['--max-volumes-per-node', '1', '--topology', 'rack=r1']);
    // node status shows what the fingerprint found.
    const node = await h.api.node();
    expect(node.plugins.find((p) => p.type === 'csi-node')).toMatchObject({
      id: 'hostpath',
      healthy: true,
      topology: { rack: 'r1' },
      maxVolumes: 1,
    });
    expect(node.drivers.raw_exec.healthy).toBe(true);
    await create('one');
    await create('two');
    await running(await workload('one', 'one'));
    const second = await workload('two', 'two');
    // Refused with the count and the limit, and retried: the room may free up.
    const said = await pollUntil('the second claim refused for the limit', async () => {
      const a = await h.api.getAlloc(second);
      const all = [...Object.values(a.tasks).flatMap((t) => t.events.map((e) => e.message)), h.log].join('\n');
      return /node \S+ holds 1 volume of plugin "hostpath" and its limit \(max_volumes_per_node\) is 1: alloc \S+ cannot claim volume "two" here/.test(
        all,
      )
        ? a
        : undefined;
    });
    expect(said.clientStatus).toBe('pending');
    expect((await h.api.getVolume('two')).claims).toEqual([]);
    // The first volume released (its job stopped): the second claim goes through on its next try.
    await h.api.stopJob('work-one');
    await running(second);
    expect((await h.api.getVolume('two')).claims.map((c) => c.allocId)).toEqual([second]);
  });

  it("detach unmounts and releases a volume whose alloc is gone; a running alloc's claim is refused; the claim sweep releases claims of allocs that are gone", async () => {
    await startWithPlugin([], 'claim_gc_interval = "1s"');
    await create('det');
    await create('swept');
    const detId = await workload('det', 'det');
    const detAlloc = await running(detId);
    const sweptId = await workload('swept', 'swept');
    await running(sweptId);
    const node = (await h.api.getPlugin('hostpath')).node!.info['Node ID'] as string;
    const busy = await refusal(h.api.detachVolume('det', node));
    expect(busy.status).toBe(409);
    expect(busy.message).toContain(`volume "det" is claimed by running alloc ${detId}`);
    expect((await refusal(h.api.detachVolume('det', 'some-other-node'))).status).toBe(400);

    // Both allocs are lost with the agent's record of them (a state restored from an old copy, say): their claims and mounts stay.
    const pids = [h.taskPid(detId, 'writer'), h.taskPid(sweptId, 'writer')];
    await h.kill('SIGKILL');
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    const state = openClientState({ path: path.join(h.dataDir, 'state.db') });
    try {
      for (const id of [detId, sweptId]) state.deleteAllocation(id);
      // The swept alloc's mount record goes too, and its mounts with it (the node was rebooted, say): nothing is left here for its claim.
      for (const { key } of state.listVolumeMounts().records) if (key.startsWith(`${sweptId}/`)) state.deleteVolumeMount(key);
    } finally {
      state.dispose();
    }
    for (const m of mountsUnder(path.join(h.dataDir, 'csi')).reverse())
      if (m.includes(sweptId) || m.includes(`${path.sep}swept${path.sep}`)) await run('umount', [m]);
    h.extraConfig = 'claim_gc_interval = "1s"\nreconcile_orphans = false';
    await h.start();
    // The sweep releases the claim with nothing left here to undo; the detached one keeps its claim for detach.
    await pollUntil(
      'the claim sweep released the claim of the gone alloc',
      async () => ((await h.api.getVolume('swept')).claims.length === 0 ? true : undefined),
      20_000,
    );
    expect((await h.api.getVolume('det')).claims.map((c) => c.allocId)).toEqual([detId]);
    const result = await h.api.detachVolume('det', node);
    expect(result).toEqual({ volumeId: 'det', nodeId: node, released: [detId] });
    // Unpublished and unstaged: nothing of "det" is mounted any more, and the plugin lists it published nowhere.
    const det = await h.api.getVolume('det');
    expect(mountsUnder(path.join(h.dataDir, 'csi')).filter((m) => m.includes(det.id) || m.includes(detId))).toEqual([]);
    expect(det.claims).toEqual([]);
    const listed = (await h.api.listExternalVolumes({ pluginId: 'hostpath' })).Volumes;
    expect(listed.find((v) => v.volumeId === 'det')!.publishedNodeIds ?? []).toEqual([]);
    expect(detAlloc.volumes['data']!.hostPath).toContain(detId);
  });
});
