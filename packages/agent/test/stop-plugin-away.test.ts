// End to end, with the real agent, the hostpath plugin as a job and real
// bind mounts: `job stop` of a workload whose node plugin is gone says that
// the alloc stopped and its volume's unmount is pending until the plugin is
// back (volume and plugin named), in the CLI and in the API's answer, without
// waiting the postrun limit for a plugin nothing runs any more; the
// mount and the claim stay until then, and once the plugin runs again the
// unmount is done and `job status` no longer lists it. Meanwhile `job
// status` lists the pending unmount with its plugin away, and a new writer of
// the volume is refused at `job run`, naming the stopped alloc whose write
// claim the catalog still records and what it waits for.
import { execFile } from 'child_process';
import { promisify } from 'util';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { requireRoot } from '@csiplug/core/testing';
import { AgentHarness, BIN, PLUGIN_JOB, mountsUnder, pollUntil, volumeSpec, workloadJob } from './support/agent-process';

jest.setTimeout(180_000);
requireRoot();
const execFileP = promisify(execFile);

describe('job stop with the node plugin gone', () => {
  let h: AgentHarness;
  beforeAll(async () => {
    // The default postrun limit (60 s): a stop whose plugin is gone for good does not wait for it.
    h = new AgentHarness();
    await h.start();
  });
  afterAll(async () => {
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual([]);
  });

  it('says the unmount is pending until the plugin is back, naming volume and plugin; the plugin back finishes it', async () => {
    const pluginJob = jobToNomadJson(await parseJobspec(PLUGIN_JOB, 'plugin.hcl'));
    const healthy = () =>
      pollUntil(
        'plugin hostpath healthy',
        async () => ((await h.api.getPlugin('hostpath').catch(() => undefined))?.nodesHealthy === 1 ? true : undefined),
        60_000,
      );
    await h.api.runJob(pluginJob);
    await healthy();
    await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('vol-s'), 'vol-s.hcl')));
    const allocId = (await h.api.runJob(jobToNomadJson(await parseJobspec(workloadJob('work', 'vol-s'), 'work.hcl')))).allocIds[0]!;
    await pollUntil(
      'the workload running',
      async () => ((await h.api.getAlloc(allocId)).clientStatus === 'running' ? true : undefined),
      60_000,
    );

    await h.api.stopJob('hostpath-plugin');
    const { stdout, stderr } = await execFileP(process.execPath, [BIN, 'job', 'stop', '-address', `http://127.0.0.1:${h.port}`, 'work'], {
      timeout: 120_000,
    });
    expect(stderr).toBe('');
    const waits =
      'the unmount of its volume "vol-s" (volume "data") waits for node plugin "hostpath", which is not running on this node: ' +
      'the volume stays mounted and claimed, and is unmounted and released once the plugin is back (start the job that runs plugin "hostpath")';
    expect(stdout).toBe(`==> Job "work" stopped (1 allocation)\n    Allocation "${allocId.slice(0, 8)}" stopped, but ${waits}\n`);
    const job = await h.api.getJob('work');
    expect(job.allocs.map((a) => `${a.id} ${a.desiredStatus} ${a.clientStatus}`)).toEqual([`${allocId} stop complete`]);
    expect(job.volumeUnmountsPending).toMatchObject([{ allocId, name: 'data', volumeId: 'vol-s', pluginId: 'hostpath', pluginAway: true }]);
    const status = await execFileP(process.execPath, [BIN, 'job', 'status', '-address', `http://127.0.0.1:${h.port}`, 'work']);
    expect(status.stdout).toContain(`\n\nVolume Unmounts Pending\n    Allocation "${allocId.slice(0, 8)}": ${waits}\n`);

    // The catalog's write claim of the stopped alloc still holds the volume: a new writer is refused at job run, naming it.
    const refused = await h.api.runJob(jobToNomadJson(await parseJobspec(workloadJob('next', 'vol-s'), 'next.hcl'))).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toMatchObject({
      status: 409,
      message:
        `job "next" was not run, nothing was placed: group "app" writes to volume "vol-s" (single-node-writer: one writer at a time), ` +
        `and alloc ${allocId}, no longer running, still holds its write claim in the volume catalog, waiting for its unmount, ` +
        `which waits for node plugin "hostpath" (not running on this node: start the job that runs it). ` +
        `To run it, let the unmount of alloc ${allocId} finish first (start the volume's plugin if it is away); ` +
        `or run it with -detach (the API's queue=true) to queue the placement until the claim is free`,
    });
    await expect(h.api.getJob('next')).rejects.toMatchObject({ status: 404 });
    // Not waited for: nothing of the plugin runs here any more, and the task event says so.
    const events = Object.values((await h.api.getAlloc(allocId)).tasks).flatMap((t) => t.events);
    expect(events.find((e) => e.type === 'Volume unmount pending')?.message).toMatch(
      /^volume "data" \(vol-s\) on plugin hostpath could not be unmounted \(plugin hostpath is not running on this node; the volume stays mounted and claimed until the plugin is back\), retrying in the background: /,
    );
    // Nothing torn down without the plugin: the mount and the claim are still there.
    expect(mountsUnder(h.dataDir).length).toBeGreaterThan(0);
    expect((await h.api.getVolume('vol-s')).claims.map((c) => c.allocId)).toEqual([allocId]);

    await h.api.runJob(pluginJob);
    await healthy();
    await pollUntil(
      'the pending unmount done',
      async () => ((await h.api.getJob('work')).volumeUnmountsPending ? undefined : true),
      60_000,
    );
    expect((await h.api.getVolume('vol-s')).claims).toEqual([]);
    await h.api.stopJob('hostpath-plugin');
  });
});
