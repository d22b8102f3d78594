// Issue 28, end to end on a real agent and the real hostpath plugin (its
// test-only request log shows what each CSI call carried): `volume register`
// of a claimed volume updates its secrets, the update survives an agent
// restart, and the next stage and publish send the new secrets; what Nomad
// refuses while claimed is refused too (in csiplug's words: what, where and
// what to do). A capacity range in an update is recorded, grows the volume
// only above what it has, and a refused one stores nothing; a mount made
// before an update sends the new secrets on its next call (node expansion).
// Ceph-style per-call snapshot
// parameters and secrets (`-parameter`, `-secret`) reach the plugin, over the
// volume's own secrets; snapshot list and delete and volume delete send the
// call's secrets. Neither the CLI nor the agent's log repeats a secret. A
// plugin that answers the snapshot list UNIMPLEMENTED is named, never an
// empty list.
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { promisify } from 'util';
import { hostpathPluginJobHcl, workloadJobHcl } from '../src/commands/specs';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { readRequestLog, type LoggedRequest } from '@csiplug/hostpath-plugin';
import { AgentHarness, BIN, pollUntil } from './support/agent-process';

jest.setTimeout(240_000);

const run = promisify(execFile);

const CEPH_PARAMETERS = { clusterID: 'ceph-1', 'csi.storage.k8s.io/snapshotter-secret-name': 'csi-rbd-secret' };

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

describe('volume register updates and per-call secrets against the real hostpath plugin', () => {
  let h: AgentHarness;
  let requestLog: string;

  const pluginHealthy = () =>
    pollUntil('plugin hostpath healthy', async () => {
      const p = await h.api.getPlugin('hostpath').catch(() => undefined);
      return p && p.nodesHealthy === 1 && p.controllersHealthy === 1 ? p : undefined;
    });
  const cli = async (args: string[]): Promise<string> => {
    try {
      const { stdout } = await run(process.execPath, [BIN, ...args, '-address', `http://127.0.0.1:${h.port}`], { timeout: 60_000 });
      return stdout;
    } catch (err) {
      throw new Error(`csiplug ${args.join(' ')} failed: ${(err as { stderr?: string }).stderr ?? String(err)}`);
    }
  };
  const cliRefused = async (args: string[]): Promise<string> => {
    try {
      await run(process.execPath, [BIN, ...args, '-address', `http://127.0.0.1:${h.port}`], { timeout: 60_000 });
    } catch (err) {
      return (err as { stderr?: string }).stderr ?? String(err);
    }
    throw new Error(`expected csiplug ${args.join(' ')} to be refused`);
  };
  const writeFile = (name: string, text: string): string => {
    const file = path.join(h.root, name);
    fs.writeFileSync(file, text);
    return file;
  };
  const workload = async (name: string, volumeId: string): Promise<string> => {
    const script = 'echo "$CSIPLUG_ALLOC_ID" > "$CSIPLUG_VOLUME_DATA/owner.txt" && exec sleep 3600';
    const hcl = workloadJobHcl(`work-${name}`, volumeId, script);
    return (await h.api.runJob(jobToNomadJson(await parseJobspec(hcl, `${name}.hcl`)))).allocIds[0]!;
  };
  const running = (id: string) =>
    pollUntil(`alloc ${id} running with its volume`, async () => {
      const a = await h.api.getAlloc(id);
      if (a.clientStatus === 'failed') throw new Error(`alloc ${id} failed: ${JSON.stringify(a.tasks)}`);
      return a.clientStatus === 'running' && a.volumes['data'] && fs.existsSync(path.join(a.volumes['data'].hostPath, 'owner.txt'))
        ? a
        : undefined;
    });
  /** The node-side mounts of `externalId` the plugin was asked for (stage and publish), from line `from` of its request log. */
  const mountsAsked = (externalId: string, from = 0): LoggedRequest[] =>
    readRequestLog(requestLog)
      .slice(from)
      .filter((r) => (r.rpc === 'NodeStageVolume' || r.rpc === 'NodePublishVolume') && r.volumeId === externalId);
  const lastOf = (rpc: string): LoggedRequest | undefined =>
    readRequestLog(requestLog)
      .filter((r) => r.rpc === rpc)
      .at(-1);

  beforeEach(() => {
    h = new AgentHarness();
  });
  afterEach(async () => {
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual([]);
  });

  it('re-register while claimed: the secrets change, the claim stays, an agent restart keeps them, and the next stage and publish send them; per-call snapshot and delete secrets and parameters reach the plugin', async () => {
    requestLog = path.join(h.root, 'hostpath-requests.jsonl');
    await h.start();
    const pluginJob = hostpathPluginJobHcl({ restartDelay: '100ms', extraArgs: ['--request-log', requestLog] });
    await h.api.runJob(jobToNomadJson(await parseJobspec(pluginJob, 'plugin.hcl')));
    await pluginHealthy();

    const created = await h.api.createVolume(
      volumeSpecToDocument(await parseVolumeSpec(volumeFile('shared', 'secrets {\n  userKey = "first-key"\n}'), 'shared.hcl')),
    );
    const externalId = created.externalId;
    const first = await workload('one', 'shared');
    await running(first);
    const firstMounts = mountsAsked(externalId);
    expect(firstMounts.map((r) => r.rpc)).toContain('NodePublishVolume');
    for (const r of firstMounts) expect(r.secrets).toEqual({ userKey: 'first-key' });

    // The update, through the CLI as an operator runs it, while alloc one claims the volume.
    const rotated = writeFile(
      'shared-rotated.hcl',
      volumeFile('shared', `external_id = "${externalId}"\nsecrets {\n  userKey = "rotated-key"\n}`),
    );
    expect(await cli(['volume', 'register', rotated])).toBe(
      `Volume "shared" updated (external id ${externalId}); its claims are kept: the next mount uses the new secrets\n`,
    );
    expect((await h.api.getVolume('shared')).claims.map((c) => c.allocId)).toEqual([first]);
    // What Nomad refuses while the volume is in use is refused (csiplug's words: what, where, what to do) and changes nothing.
    const mountOptions = writeFile(
      'shared-ro.hcl',
      volumeFile('shared', `external_id = "${externalId}"\nmount_options {\n  mount_flags = ["noatime"]\n}`),
    );
    expect(await cliRefused(['volume', 'register', mountOptions])).toContain(
      `volume "shared" is registered already and cannot be updated as asked: its mount options cannot change while it is in use (claimed by ${first}); stop the allocs first`,
    );
    const otherPlugin = writeFile('shared-moved.hcl', volumeFile('shared', 'external_id = "elsewhere"'));
    expect(await cliRefused(['volume', 'register', otherPlugin])).toContain(
      `its external id cannot change (it is "${externalId}", the spec says "elsewhere")`,
    );
    expect((await h.api.getVolume('shared')).mountOptions).toBeUndefined();

    // Kept in the agent's state: a restarted agent has the new secrets.
    await h.kill('SIGKILL');
    await h.start();
    await pluginHealthy();
    await running(first);

    // The next mount: alloc one stops (unpublish, unstage), alloc two mounts the volume again.
    await h.api.stopJob('work-one');
    await pollUntil('the claim of alloc one released', async () =>
      (await h.api.getVolume('shared')).claims.length === 0 ? true : undefined,
    );
    const mark = readRequestLog(requestLog).length;
    const second = await workload('two', 'shared');
    await running(second);
    const nextMounts = mountsAsked(externalId, mark);
    expect(nextMounts.map((r) => r.rpc)).toContain('NodePublishVolume');
    for (const r of nextMounts) expect(r.secrets).toEqual({ userKey: 'rotated-key' });

    // Ceph-style per-call snapshot parameters and secrets: the call's secrets go over the volume's, the parameters are the call's.
    const snapOut = await cli([
      'volume',
      'snapshot',
      'create',
      '-json',
      '-secret',
      'userID=admin',
      '-secret',
      'userKey=per-call-key',
      '-parameter',
      'clusterID=ceph-1',
      '-parameter',
      'csi.storage.k8s.io/snapshotter-secret-name=csi-rbd-secret',
      'shared',
      'nightly',
    ]);
    const snapshotId = (JSON.parse(snapOut) as { id: string }).id;
    expect(lastOf('CreateSnapshot')).toMatchObject({
      sourceVolumeId: externalId,
      name: 'nightly',
      parameters: CEPH_PARAMETERS,
      secrets: { userID: 'admin', userKey: 'per-call-key' },
    });
    expect(snapOut).not.toContain('per-call-key');
    await cli(['volume', 'snapshot', 'list', '-plugin', 'hostpath', '-secret', 'userID=lister']);
    expect(lastOf('ListSnapshots')).toMatchObject({ secrets: { userID: 'lister' } });
    await cli(['volume', 'snapshot', 'delete', 'hostpath', snapshotId, '-secret', 'userID=deleter']);
    expect(lastOf('DeleteSnapshot')).toEqual({
      rpc: 'DeleteSnapshot',
      time: expect.any(Number),
      snapshotId,
      secrets: { userID: 'deleter' },
    });

    await h.api.stopJob('work-two');
    await pollUntil('the claim of alloc two released', async () =>
      (await h.api.getVolume('shared')).claims.length === 0 ? true : undefined,
    );
    expect(await cli(['volume', 'delete', '-secret', 'userID=volume-deleter', 'shared'])).toBe('Successfully deleted volume "shared"\n');
    expect(lastOf('DeleteVolume')).toMatchObject({ volumeId: externalId, secrets: { userKey: 'rotated-key', userID: 'volume-deleter' } });

    // No secret value in the agent's own output.
    for (const secret of ['first-key', 'rotated-key', 'per-call-key', 'volume-deleter']) expect(h.log).not.toContain(secret);
  });

  it('a register update with a capacity range: another capacity_max or a lower capacity_min is recorded and grows nothing; a capacity_max below the size is refused and stores nothing; a larger capacity_min grows the volume, and its live mount, updated before, sends the new secrets', async () => {
    requestLog = path.join(h.root, 'hostpath-requests.jsonl');
    await h.start();
    const pluginJob = hostpathPluginJobHcl({ restartDelay: '100ms', extraArgs: ['--request-log', requestLog] });
    await h.api.runJob(jobToNomadJson(await parseJobspec(pluginJob, 'plugin.hcl')));
    await pluginHealthy();
    const MiB = 1024 * 1024;
    const created = await h.api.createVolume(
      volumeSpecToDocument(
        await parseVolumeSpec(volumeFile('sized', 'capacity_min = "1MiB"\nsecrets {\n  userKey = "first-key"\n}'), 'sized.hcl'),
      ),
    );
    const externalId = created.externalId;
    const size = created.capacityBytes!;
    const first = await workload('sized', 'sized');
    await running(first);
    const update = (name: string, extra: string) => writeFile(name, volumeFile('sized', `external_id = "${externalId}"\n${extra}`));
    const expansions = () => readRequestLog(requestLog).filter((r) => r.rpc === 'ControllerExpandVolume' || r.rpc === 'NodeExpandVolume');

    // The secrets rotated while alloc one has the volume mounted.
    await cli(['volume', 'register', update('rotated.hcl', 'secrets {\n  userKey = "rotated-key"\n}')]);
    // Another capacity_max, and a lower capacity_min: recorded, nothing grown, nothing asked of the plugin.
    await cli(['volume', 'register', update('max.hcl', 'capacity_max = "64MiB"\nsecrets {\n  userKey = "rotated-key"\n}')]);
    expect(await h.api.getVolume('sized')).toMatchObject({ capacityBytes: size, capacityMax: 64 * MiB });
    await cli(['volume', 'register', update('lower.hcl', 'capacity_min = "512KiB"\nsecrets {\n  userKey = "rotated-key"\n}')]);
    expect(await h.api.getVolume('sized')).toMatchObject({ capacityBytes: size, capacityMin: 512 * 1024, capacityMax: 64 * MiB });
    expect(expansions()).toEqual([]);
    // A capacity_max below the size: refused, and none of the update is kept (not its secrets, not its range).
    expect(
      await cliRefused(['volume', 'register', update('shrink.hcl', 'capacity_max = "512KiB"\nsecrets {\n  userKey = "never-key"\n}')]),
    ).toContain(`its capacity_max ${512 * 1024} is below the ${size} bytes it has: volumes only grow`);
    expect(await h.api.getVolume('sized')).toMatchObject({ capacityMin: 512 * 1024, capacityMax: 64 * MiB });

    // A capacity_min above the size grows the volume, on the controller and where alloc one has it mounted — with the
    // secrets of the same update, rotated again (Nomad's Register expands the volume as merged: rotated secrets may be
    // all the storage takes by then), not the ones stored before it.
    await cli(['volume', 'register', update('grow.hcl', 'capacity_min = "4MiB"\nsecrets {\n  userKey = "grow-key"\n}')]);
    expect(await h.api.getVolume('sized')).toMatchObject({ capacityBytes: 4 * MiB, capacityMin: 4 * MiB });
    const grown = await pollUntil('the node expansion asked of the plugin', async () =>
      expansions().some((r) => r.rpc === 'NodeExpandVolume') ? expansions() : undefined,
    );
    expect(grown.map((r) => [r.rpc, r.secrets])).toEqual([
      ['ControllerExpandVolume', { userKey: 'grow-key' }],
      ['NodeExpandVolume', { userKey: 'grow-key' }],
    ]);
    // volume create again, larger, with secrets: the growth sends them (Nomad's Create merges them in first).
    await h.api.createVolume(
      volumeSpecToDocument(
        await parseVolumeSpec(volumeFile('sized', 'capacity_min = "8MiB"\nsecrets {\n  userKey = "create-key"\n}'), 'sized.hcl'),
      ),
    );
    const recreated = await pollUntil('the second node expansion asked of the plugin', async () =>
      expansions().filter((r) => r.rpc === 'NodeExpandVolume').length === 2 ? expansions().slice(2) : undefined,
    );
    expect(recreated.map((r) => [r.rpc, r.secrets])).toEqual([
      ['ControllerExpandVolume', { userKey: 'create-key' }],
      ['NodeExpandVolume', { userKey: 'create-key' }],
    ]);
    await h.api.stopJob('work-sized');
    await pollUntil('the claim of alloc one released', async () =>
      (await h.api.getVolume('sized')).claims.length === 0 ? true : undefined,
    );
  });

  it('volume snapshot list of a plugin that answers UNIMPLEMENTED says the plugin does not list snapshots, named or not, never "No snapshots"', async () => {
    await h.start();
    const pluginJob = hostpathPluginJobHcl({ restartDelay: '100ms', extraArgs: ['--unimplemented-rpc', 'ListSnapshots'] });
    await h.api.runJob(jobToNomadJson(await parseJobspec(pluginJob, 'plugin.hcl')));
    await pluginHealthy();
    const said =
      'Error: plugin "hostpath" does not list snapshots (its controller answered the list with UNIMPLEMENTED); the snapshots it holds cannot be shown here: see them on the storage system itself\n';
    expect(await cliRefused(['volume', 'snapshot', 'list', '-plugin', 'hostpath'])).toBe(said);
    // Not named: the one plugin that offers the list is asked, and says the same.
    expect(await cliRefused(['volume', 'snapshot', 'list'])).toBe(said);
  });
});
