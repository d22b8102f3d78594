// What `alloc status` says when an unmount cannot be done at once: a
// workload stops while its node plugin is away, so its unmount is left
// pending (a "Volume unmount pending" event with the cause); when the plugin
// is back, the reconciler's background retry finishes it and the same alloc
// says "Volume unmounted" — its record never ends on "pending" once done.
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { AgentHarness, PLUGIN_JOB, mountsUnder, pollUntil, volumeSpec, workloadJob } from './support/agent-process';

jest.setTimeout(120_000);

describe('an unmount left pending, then done in the background', () => {
  let h: AgentHarness;
  beforeAll(async () => {
    h = new AgentHarness('timeouts {\n  plugin_wait_postrun = "1s"\n}');
    await h.start();
  });
  afterAll(async () => {
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual([]);
  });

  it('shows "Volume unmount pending" with its cause, then "Volume unmounted" on the same alloc once the plugin is back', async () => {
    const pluginJob = jobToNomadJson(await parseJobspec(PLUGIN_JOB, 'plugin.hcl'));
    const healthy = () =>
      pollUntil(
        'plugin hostpath healthy',
        async () => ((await h.api.getPlugin('hostpath').catch(() => undefined))?.nodesHealthy === 1 ? true : undefined),
        60_000,
      );
    await h.api.runJob(pluginJob);
    await healthy();
    await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('vol-p'), 'vol-p.hcl')));
    const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(workloadJob('work', 'vol-p'), 'work.hcl')));
    const allocId = allocIds[0]!;
    await pollUntil(
      'the workload running',
      async () => ((await h.api.getAlloc(allocId)).clientStatus === 'running' ? true : undefined),
      60_000,
    );

    // The plugin goes away; then the workload stops: its unmount waits 1 s for the plugin (plugin_wait_postrun), then is left pending.
    await h.api.stopJob('hostpath-plugin');
    await h.api.stopJob('work');
    const events = async () => Object.values((await h.api.getAlloc(allocId)).tasks).flatMap((t) => t.events);
    const pending = await pollUntil(
      'the pending unmount event',
      async () => (await events()).find((e) => e.type === 'Volume unmount pending'),
      30_000,
    );
    expect(pending.message).toMatch(/volume "data" \(vol-p\) on plugin hostpath could not be unmounted .*retrying in the background/);
    expect(pending.details).toEqual({ volume_id: 'vol-p' });
    expect((await h.api.getVolume('vol-p')).claims).toHaveLength(1);
    expect(mountsUnder(h.dataDir).length).toBeGreaterThan(0);

    // The plugin is back: the retry unmounts, releases the claim, and the alloc says so after its pending event.
    await h.api.runJob(pluginJob);
    await healthy();
    const done = await pollUntil(
      'the background unmount done',
      async () => {
        const all = await events();
        const last = [...all].reverse().find((e) => e.details?.volume_id === 'vol-p');
        return last?.type === 'Volume unmounted' ? last : undefined;
      },
      60_000,
    );
    expect(done.message).toBe('volume vol-p unmounted later (a background retry, or a volume detach) and its claim released');
    expect((await h.api.getVolume('vol-p')).claims).toEqual([]);
    // Said once, on each task of the alloc (it has one).
    expect((await events()).filter((e) => e.type === 'Volume unmounted')).toHaveLength(1);
    await h.api.stopJob('hostpath-plugin');
  });
});
