import { DefaultTimeoutPolicy, FakeClock, MemoryLogger } from '@csiplug/core';
import { ClientStateDB, openClientState } from '@csiplug/state';
import { CSIHook, EVENT_VOLUME_MOUNT_FAILED, EVENT_VOLUME_UNMOUNT_PENDING, VolumeHookError } from './csi-hook';
import type { VolumeRequest } from './hook';
import { PendingUnmounts } from './pending-unmounts';
import { FakeCSIManager, FakeClaimer, FakeMountTable } from './testing/fake-csi-manager';
import { allocContext } from './testing/task-context';

const volume = (name: string, source: string, over: Partial<VolumeRequest> = {}): VolumeRequest => ({
  name,
  type: 'csi',
  source,
  accessMode: 'single-node-writer',
  attachmentMode: 'file-system',
  readOnly: false,
  ...over,
});

describe('csi hook', () => {
  let clock: FakeClock;
  let state: ClientStateDB;
  let mounts: FakeMountTable;
  let csi: FakeCSIManager;
  let claimer: FakeClaimer;
  let timeouts: DefaultTimeoutPolicy;
  let logger: MemoryLogger;
  let pending: PendingUnmounts;

  const newPending = () => new PendingUnmounts(csi, claimer, state, clock, timeouts, logger);
  const hook = () => new CSIHook(csi, claimer, state, mounts, pending, clock, timeouts, logger);

  beforeEach(() => {
    clock = new FakeClock(0);
    state = openClientState({ memory: true });
    mounts = new FakeMountTable();
    timeouts = new DefaultTimeoutPolicy({ pluginWaitPrerun: 60_000, pluginWaitRestore: 300_000 });
    csi = new FakeCSIManager(mounts, { prerun: 60_000, restore: 300_000, postrun: 86_400_000 }, clock);
    claimer = new FakeClaimer();
    logger = new MemoryLogger();
    pending = newPending();
    pending.start();
  });

  afterEach(() => {
    pending.dispose();
    state.close();
  });

  it('claims, then mounts, then saves the stub; postrun unmounts, then releases', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    const result = await hook().prerun(ctx);
    const vm = csi.managers.get('hostpath')!;
    expect(csi.waits).toEqual([{ name: 'hostpath', phase: 'prerun' }]);
    expect(claimer.claims).toEqual([{ volumeId: 'vol-1', allocId: 'alloc-w', readOnly: false, accessMode: 'single-node-writer', attachmentMode: 'file-system' }]);
    expect(vm.calls).toEqual(['mount vol-1 alloc-w']);
    expect(result.volumes?.data).toMatchObject({ volumeId: 'vol-1', pluginId: 'hostpath', readOnly: false });
    expect(state.getVolumeStubs('alloc-w')?.data).toMatchObject({ volumeId: 'vol-1', pluginId: 'hostpath', targetPath: result.volumes!.data!.hostPath, publishContext: { attached: 'yes' } });

    await hook().postrun(ctx);
    expect(vm.calls).toEqual(['mount vol-1 alloc-w', 'unmount vol-1 alloc-w']);
    expect(claimer.releases).toEqual(['vol-1 alloc-w']);
    expect(state.getVolumeStubs('alloc-w')).toEqual({});
  });

  it('waits for a plugin that is not registered yet', async () => {
    claimer.add('vol-1');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    let done = false;
    const p = hook().prerun(ctx).then(() => (done = true));
    await clock.advance(30_000);
    expect(done).toBe(false);
    csi.bringUp('hostpath');
    await p;
    expect(claimer.claims).toHaveLength(1);
  });

  it('an unknown volume fails prerun with a clear error, and postrun still cleans up what was mounted', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1'), volume('logs', 'vol-missing')] } });
    const err = await hook()
      .prerun(ctx)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeHookError);
    expect((err as Error).message).toMatch(/volume "logs" \(vol-missing\): volume vol-missing is not registered/);
    expect(ctx.events.at(-1)).toMatchObject({ type: EVENT_VOLUME_MOUNT_FAILED, failed: true });
    await hook().postrun(ctx);
    expect(csi.managers.get('hostpath')!.calls).toEqual(['mount vol-1 alloc-w', 'unmount vol-1 alloc-w']);
    expect(claimer.releases).toEqual(['vol-1 alloc-w']);
  });

  it('a claim whose mount fails is released, since no stub will ever release it', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    csi.managers.get('hostpath')!.failMount = new Error('NodeStageVolume: device busy');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    await expect(hook().prerun(ctx)).rejects.toThrow(/device busy/);
    expect(claimer.claims).toHaveLength(1);
    expect(claimer.releases).toEqual(['vol-1 alloc-w']);
    await hook().postrun(ctx);
    expect(claimer.releases).toEqual(['vol-1 alloc-w']);
  });

  it('retries a claim refused for now with the policy backoff', async () => {
    claimer.add('vol-1');
    claimer.refuseNext = 2;
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    let done = false;
    const p = hook().prerun(ctx).then(() => (done = true));
    await clock.advance(999);
    expect(claimer.claims).toHaveLength(1);
    await clock.advance(1); // 1 s
    expect(claimer.claims).toHaveLength(2);
    await clock.advance(2_000); // then 2 s
    await p;
    expect(done).toBe(true);
    expect(claimer.claims).toHaveLength(3);
  });

  it('gives up on a claim that is never granted within the retry limit', async () => {
    timeouts = new DefaultTimeoutPolicy({ claimRetryLimit: 10_000 });
    claimer.add('vol-1');
    claimer.refuseNext = 1000;
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    const p = hook()
      .prerun(ctx)
      .catch((e: unknown) => e);
    await clock.advance(20_000);
    expect(String(await p)).toMatch(/claim not granted within 10s/);
  });

  it('restore: a stub whose mount is live needs no claim and no mount, after waiting with the restore limit', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const first = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    const mounted = await hook().prerun(first);
    // agent restart: the plugin is not back yet
    csi.bringDown('hostpath');
    const claimsBefore = claimer.claims.length;
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] }, kind: 'restore' });
    let done = false;
    const p = hook().prerun(ctx).then((r) => ((done = true), r));
    await clock.advance(120_000); // longer than the prerun limit: restore waits longer
    expect(done).toBe(false);
    csi.bringUp('hostpath');
    const result = await p;
    expect(csi.waits.at(-1)).toEqual({ name: 'hostpath', phase: 'restore' });
    expect(claimer.claims).toHaveLength(claimsBefore);
    expect(csi.managers.get('hostpath')!.calls).toEqual(['mount vol-1 alloc-w']);
    expect(result.volumes?.data?.hostPath).toBe(mounted.volumes!.data!.hostPath);
  });

  it('restore: a stub whose mount is gone is claimed and mounted again', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    await hook().prerun(allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } }));
    mounts.mounted.clear(); // host reboot
    await hook().prerun(allocContext({ alloc: { volumes: [volume('data', 'vol-1')] }, kind: 'restore' }));
    expect(claimer.claims).toHaveLength(2);
    expect(csi.managers.get('hostpath')!.calls).toEqual(['mount vol-1 alloc-w', 'mount vol-1 alloc-w']);
  });

  it('restore: a mount table that cannot be read (EMFILE) is read again, never taken for "mount gone" nor failed on', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const mounted = await hook().prerun(allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } }));
    // agent restart while the agent is out of file descriptors
    let faults = 3;
    const read = mounts.isMountPoint.bind(mounts);
    mounts.isMountPoint = async (target: string) => {
      if (faults > 0) {
        faults--;
        throw Object.assign(new Error("EMFILE: too many open files, open '/proc/self/mountinfo'"), { code: 'EMFILE' });
      }
      return read(target);
    };
    const claimsBefore = claimer.claims.length;
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] }, kind: 'restore' });
    let done = false;
    const p = hook()
      .prerun(ctx)
      .then((r) => ((done = true), r));
    await clock.advance(0);
    expect(done).toBe(false);
    await clock.runAll();
    const result = await p;
    expect(result.volumes?.data?.hostPath).toBe(mounted.volumes!.data!.hostPath);
    expect(claimer.claims).toHaveLength(claimsBefore);
    expect(csi.managers.get('hostpath')!.calls).toEqual(['mount vol-1 alloc-w']);
    expect(ctx.events.map((e) => e.type)).not.toContain(EVENT_VOLUME_MOUNT_FAILED);
    expect(logger.find('cannot read the mount table for a fault of the agent itself', 'warn')).toHaveLength(3);
  });

  it('restore: a plugin that never comes back fails after the restore limit with a clear error', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    await hook().prerun(allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } }));
    csi.bringDown('hostpath');
    const p = hook()
      .prerun(allocContext({ alloc: { volumes: [volume('data', 'vol-1')] }, kind: 'restore' }))
      .catch((e: unknown) => e);
    await clock.advance(300_000);
    const err = (await p) as Error;
    expect(err.message).toMatch(/volume "data" \(vol-1\) on plugin hostpath: plugin hostpath for type csi-node did not become healthy.*check the plugin task's logs/);
  });

  it("keeps the plugin's own volume id in the stub, so postrun and the pending queue unmount by it", async () => {
    claimer.add('vol-1'); // the catalog id is vol-1; the plugin knows it as ext-vol-1
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    await hook().prerun(ctx);
    expect(state.getVolumeStubs('alloc-w')?.data).toMatchObject({ volumeId: 'vol-1', externalId: 'ext-vol-1' });
    const vm = csi.managers.get('hostpath')!;
    vm.failUnmount = new Error('plugin busy');
    await hook().postrun(ctx);
    expect(state.listPendingUnmounts()).toEqual([expect.objectContaining({ volumeId: 'vol-1', externalId: 'ext-vol-1' })]);
    vm.failUnmount = undefined;
    await clock.advance(1_000);
    expect(state.listPendingUnmounts()).toEqual([]);
    expect(vm.unmountRefs).toEqual([
      { id: 'vol-1', externalId: 'ext-vol-1' },
      { id: 'vol-1', externalId: 'ext-vol-1' },
    ]);
  });

  it('a failed unmount is saved, retried in the background, and finishes the release', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    await hook().prerun(ctx);
    const vm = csi.managers.get('hostpath')!;
    vm.failUnmount = new Error('plugin busy');
    await hook().postrun(ctx);
    expect(ctx.events.at(-1)).toMatchObject({ type: EVENT_VOLUME_UNMOUNT_PENDING });
    expect(claimer.releases).toEqual([]);
    expect(state.listPendingUnmounts()).toEqual([expect.objectContaining({ id: 'alloc-w/data', volumeId: 'vol-1', attempts: 1, lastError: 'plugin busy' })]);
    expect(state.getVolumeStubs('alloc-w')?.data).toBeDefined();

    await clock.advance(1_000); // first retry fails again
    expect(state.listPendingUnmounts()[0]!.attempts).toBe(2);
    vm.failUnmount = undefined;
    await clock.advance(2_000);
    expect(state.listPendingUnmounts()).toEqual([]);
    expect(claimer.releases).toEqual(['vol-1 alloc-w']);
    expect(state.getVolumeStubs('alloc-w')).toEqual({});
  });

  it('pending unmounts survive shutdown and resume on the next start', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    await hook().prerun(ctx);
    csi.bringDown('hostpath'); // the plugin is gone: unmount cannot happen now
    await hook().postrun(ctx);
    pending.dispose();
    await clock.advance(600_000);
    expect(state.listPendingUnmounts()).toHaveLength(1);

    // agent restart
    pending = newPending();
    pending.start();
    await clock.advance(0);
    expect(state.listPendingUnmounts()[0]!.attempts).toBe(2); // tried at once, plugin still away
    csi.bringUp('hostpath'); // healthy: retried at once
    await clock.advance(0);
    expect(state.listPendingUnmounts()).toEqual([]);
    expect(claimer.releases).toEqual(['vol-1 alloc-w']);
  });

  it('an abort while waiting for the plugin rejects prerun with the abort reason', async () => {
    claimer.add('vol-1');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    const p = hook()
      .prerun(ctx)
      .catch((e: unknown) => e);
    ctx.controller.abort();
    expect(String(await p)).toMatch(/aborted/);
    expect(claimer.claims).toHaveLength(0);
  });

  it('allocs without csi volumes are left alone', async () => {
    const ctx = allocContext();
    expect(await hook().prerun(ctx)).toEqual({});
    await hook().postrun(ctx);
    expect(csi.waits).toEqual([]);
  });
});
