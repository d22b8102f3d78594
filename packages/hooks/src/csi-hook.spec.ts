// The csi hook over the real volume reconciler (@csiplug/volumes), with
// fakes under it: a FakeCSIManager whose node plugins are FakeVolumeManagers
// over one FakeMountTable, a FakeClaimer, a FakeMountStore and a FakeClock.
// The hook only states what the alloc wants and turns the outcome into task
// events and errors, so that is what this file checks; how a mount is
// claimed, staged, published, undone and retried is the reconciler's
// (volume-reconciler.spec.ts in @csiplug/volumes).
import { DefaultTimeoutPolicy, MemoryLogger, ShutdownError } from '@csiplug/core';
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import { CSIPluginWaitTimeoutError } from '@csiplug/csimanager';
import { FakeCSIManager, FakeMountTable, type FakeVolumeManager } from '@csiplug/csimanager/testing';
import { VolumeReconciler } from '@csiplug/volumes';
import { FakeClaimer, FakeMountStore } from '@csiplug/volumes/testing';
import {
  CSIHook,
  EVENT_VOLUME_KEPT_PLUGIN_AWAY,
  EVENT_VOLUME_MOUNT_FAILED,
  EVENT_VOLUME_UNMOUNTED,
  EVENT_WAITING_FOR_PLUGIN,
  EVENT_VOLUME_MOUNT_RETRYING,
  EVENT_VOLUME_MOUNTED,
  EVENT_VOLUME_UNMOUNT_PENDING,
  LIVE_MOUNT_EVENTS,
  VolumeHookError,
} from './csi-hook';
import type { VolumeRequest } from './hook';
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

const TARGET = '/var/lib/csiplug/csi/node/hostpath/per-alloc/alloc-w/vol-1/rw-file-system-single-node-writer';

describe('csi hook', () => {
  let clock: FakeClock;
  let mounts: FakeMountTable;
  let csi: FakeCSIManager;
  let claimer: FakeClaimer;
  let store: FakeMountStore;
  let timeouts: DefaultTimeoutPolicy;
  let logger: MemoryLogger;
  let reconciler: VolumeReconciler;

  const newReconciler = () => new VolumeReconciler(csi, claimer, store, mounts, clock, timeouts, logger);
  const hook = () => new CSIHook(reconciler, logger);
  const vm = (): FakeVolumeManager => csi.managers.get('hostpath')!;

  /** An agent restart: a new CSI manager (no plugin up yet) and a new reconciler over the same records and mounts. */
  async function restartAgent(): Promise<void> {
    reconciler.dispose();
    await csi.dispose();
    csi = new FakeCSIManager({ clock, timeouts, mounts });
    reconciler = newReconciler();
    reconciler.start();
  }

  beforeEach(() => {
    clock = new FakeClock(0);
    mounts = new FakeMountTable();
    timeouts = new DefaultTimeoutPolicy({ pluginWaitPrerun: 60_000, pluginWaitRestore: 300_000, pluginWaitPostrun: 60_000 });
    csi = new FakeCSIManager({ clock, timeouts, mounts });
    claimer = new FakeClaimer();
    store = new FakeMountStore();
    logger = new MemoryLogger();
    reconciler = newReconciler();
    reconciler.start();
  });

  afterEach(async () => {
    reconciler.dispose();
    await csi.dispose();
  });

  it('prerun mounts each csi volume through the reconciler and says so in a "Volume mounted" event; postrun unmounts them', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    const result = await hook().prerun(ctx);
    expect(csi.waits).toEqual([{ type: 'csi-node', name: 'hostpath', phase: 'prerun' }]);
    expect(result.volumes).toEqual({ data: { name: 'data', volumeId: 'vol-1', pluginId: 'hostpath', hostPath: TARGET, readOnly: false } });
    expect(ctx.events).toEqual([{ type: EVENT_VOLUME_MOUNTED, message: `volume "data" (vol-1) mounted at ${TARGET}`, time: 0 }]);
    expect(await mounts.isMountPoint(TARGET)).toBe(true);
    expect(reconciler.mounted('alloc-w').map((m) => m.name)).toEqual(['data']);

    await hook().postrun(ctx);
    // Nothing pending: the unmount is said done.
    expect(ctx.events.slice(1)).toEqual([
      {
        type: EVENT_VOLUME_UNMOUNTED,
        message: 'volume "data" (vol-1) unmounted and its claim released',
        time: 0,
        details: { volume_id: 'vol-1' },
      },
    ]);
    expect(await mounts.isMountPoint(TARGET)).toBe(false);
    expect(claimer.releases).toEqual(['vol-1 alloc-w']);
    expect(reconciler.list('alloc-w')).toEqual([]);
  });

  it('passes the usage of the request (read-only, modes, mount options) to the reconciler', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const ctx = allocContext({
      alloc: {
        volumes: [
          volume('data', 'vol-1', {
            readOnly: true,
            accessMode: 'multi-node-reader-only',
            mountOptions: { fsType: 'ext4', mountFlags: ['noatime'] },
          }),
        ],
      },
    });
    const result = await hook().prerun(ctx);
    expect(result.volumes?.data?.readOnly).toBe(true);
    expect(reconciler.list('alloc-w')[0]!.usage).toEqual({
      readOnly: true,
      attachmentMode: 'file-system',
      accessMode: 'multi-node-reader-only',
      mountOptions: { fsType: 'ext4', mountFlags: ['noatime'] },
    });
    expect(claimer.claims).toEqual([
      { volumeId: 'vol-1', allocId: 'alloc-w', readOnly: true, accessMode: 'multi-node-reader-only', attachmentMode: 'file-system' },
    ]);
  });

  it('waits for a plugin that is not registered yet (the prerun limit)', async () => {
    claimer.add('vol-1');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    let done = false;
    const p = hook()
      .prerun(ctx)
      .then(() => (done = true));
    await clock.advance(30_000);
    expect(done).toBe(false);
    expect(csi.waits).toEqual([{ type: 'csi-node', name: 'hostpath', phase: 'prerun' }]);
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
    expect((err as Error).message).toMatch(/^volume "logs" \(vol-missing\): volume "vol-missing" is not registered/);
    expect((err as VolumeHookError).pluginId).toBeUndefined(); // no catalog entry, so no plugin to name
    expect(ctx.events.map((e) => e.type)).toEqual([EVENT_VOLUME_MOUNTED, EVENT_VOLUME_MOUNT_FAILED]);
    expect(ctx.events.at(-1)).toMatchObject({ type: EVENT_VOLUME_MOUNT_FAILED, message: (err as Error).message, failed: true });
    expect(reconciler.list('alloc-w').map((r) => r.name)).toEqual(['data']); // the unknown one left nothing

    await hook().postrun(ctx);
    expect(vm().calls).toEqual(['stage vol-1', 'publish vol-1 alloc-w', 'unpublish vol-1 alloc-w', 'unstage vol-1']);
    expect(claimer.releases).toEqual(['vol-1 alloc-w']);
    expect(ctx.events.filter((e) => e.type === EVENT_VOLUME_UNMOUNT_PENDING)).toEqual([]);
  });

  it('a mount that fails fails prerun with a VolumeHookError naming volume, plugin and cause, and a "Volume mount failed" event', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    vm().failNext('stage', { error: new Error('NodeStageVolume: device busy') });
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    const err = await hook()
      .prerun(ctx)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeHookError);
    expect(err).toMatchObject({ volumeName: 'data', volumeId: 'vol-1', pluginId: 'hostpath' });
    expect((err as Error).message).toBe('volume "data" (vol-1) on plugin hostpath: NodeStageVolume: device busy');
    expect((err as Error).cause).toEqual(new Error('NodeStageVolume: device busy'));
    expect(ctx.events).toEqual([{ type: EVENT_VOLUME_MOUNT_FAILED, message: (err as Error).message, failed: true, time: 0 }]);
  });

  it('a claim refused for now is a "Volume mount retrying" event saying why and when, once per new cause and again at retry 8, then the mount goes on', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    claimer.refuseNext = 9;
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    const mounting = hook().prerun(ctx);
    await flushMicrotasks();
    expect(ctx.events).toEqual([
      {
        type: EVENT_VOLUME_MOUNT_RETRYING,
        message: 'volume "data" (vol-1) could not be claimed yet, trying again in 1s (retry 1): volume vol-1 has no free write claim',
        time: 0,
      },
    ]);
    for (let i = 0; i < 10; i++) await clock.advance(60_000);
    await mounting;
    // The same cause nine times is one event, told again at retry 8 (a cause that lasts is not forgotten); then the mount says it is done.
    expect(ctx.events.map((e) => e.type)).toEqual([EVENT_VOLUME_MOUNT_RETRYING, EVENT_VOLUME_MOUNT_RETRYING, EVENT_VOLUME_MOUNTED]);
    expect(ctx.events[1]!.message).toMatch(/\(retry 8\): volume vol-1 has no free write claim$/);
    expect(claimer.claims).toHaveLength(10);
  });

  it('restore: a live mount is kept at once without waiting for its plugin — a "Volume kept, plugin away" event — and checked when the plugin is back', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const mounted = await hook().prerun(allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } }));
    const changes = [...vm().changes];
    await restartAgent(); // the plugin is not back yet

    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] }, kind: 'restore' });
    const h = hook();
    const result = await h.prerun(ctx);
    expect(result.volumes).toEqual(mounted.volumes);
    expect(csi.waits).toEqual([]);
    expect(ctx.events).toEqual([
      {
        type: EVENT_VOLUME_KEPT_PLUGIN_AWAY,
        message: `volume "data" (vol-1) is still mounted at ${TARGET} and is kept while its plugin hostpath is away; it is checked when the plugin is back`,
        time: 0,
      },
    ]);
    // Longer than the restore limit: still mounted, nothing undone.
    await clock.advance(600_000);
    expect(await mounts.isMountPoint(TARGET)).toBe(true);

    csi.bringUp('hostpath');
    await clock.advance(0);
    await flushMicrotasks(100);
    expect(ctx.events.slice(1).map((e) => [e.type, e.message])).toEqual([
      [LIVE_MOUNT_EVENTS['plugin-back'], `plugin hostpath is back (alloc alloc-hostpath); checking volume "data" (vol-1) at ${TARGET}`],
      [LIVE_MOUNT_EVENTS.checked, `volume "data" (vol-1) at ${TARGET} answers; kept as it is`],
    ]);
    expect(claimer.claims).toHaveLength(1); // only the first start's
    expect(vm().changes).toEqual([]); // the new incarnation's volume manager changed nothing
    expect(changes).toEqual(['stage vol-1 rw-file-system-single-node-writer', 'publish vol-1 alloc-w rw-file-system-single-node-writer']);
    await h.postrun(ctx);
  });

  it('a stale mount remounted under on_stale_mount = "remount" is told to the runner by the volume\'s name (an isolated task with a private bind restarts to see it)', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1', { onStaleMount: 'remount' })] } });
    const h = hook();
    await h.prerun(ctx);
    csi.crash('hostpath');
    mounts.failStat(TARGET, 'ENOTCONN');
    csi.bringUp('hostpath');
    await clock.advance(0);
    await flushMicrotasks(100);
    expect(ctx.events.at(-1)!.type).toBe(LIVE_MOUNT_EVENTS.remounted);
    expect(ctx.remounted).toEqual(['data']);
    expect(ctx.restarts).toEqual([]);
    await h.postrun(ctx);
  });

  it('a stale mount found when the plugin is back is a "Volume stale" and a "Volume remounted" event; under on_stale_mount = "restart" the tasks restart', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1', { onStaleMount: 'restart' })] } });
    const h = hook();
    await h.prerun(ctx);
    expect(reconciler.list('alloc-w')[0]!.onStaleMount).toBe('restart');
    csi.crash('hostpath');
    mounts.failStat(TARGET, 'ENOTCONN');
    csi.bringUp('hostpath');
    await clock.advance(0);
    await flushMicrotasks(100);
    expect(ctx.events.slice(1).map((e) => e.type)).toEqual([
      LIVE_MOUNT_EVENTS['plugin-away'],
      LIVE_MOUNT_EVENTS['plugin-back'],
      LIVE_MOUNT_EVENTS.stale,
      LIVE_MOUNT_EVENTS.remounted,
    ]);
    expect(ctx.events.at(-2)!.message).toMatch(
      /is stale: .* does not answer a stat \(ENOTCONN\); remounting it through plugin hostpath, then restarting the alloc's tasks$/,
    );
    expect(ctx.restarts).toEqual(['volume "data" (vol-1) was stale and has been remounted (on_stale_mount = "restart")']);
    // The tasks restart anyway: no separate word of the remount.
    expect(ctx.remounted).toEqual([]);

    // After postrun the hook hears nothing more of the reconciler.
    await h.postrun(ctx);
    const seen = ctx.events.length;
    await hook().prerun(allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } }));
    csi.crash('hostpath');
    csi.bringUp('hostpath');
    await clock.advance(0);
    await flushMicrotasks(100);
    expect(ctx.events.slice(seen).map((e) => e.type)).toEqual([]);
  });

  it('a signal the agent detaching aborted before prerun listened ends the listening at once (an abort listener added late never fires)', async () => {
    let subscriptions = 0;
    let disposed = 0;
    // A reconciler that mounts whatever it is asked (a restore of a live mount answers without looking at the signal).
    const volumes = {
      ...reconciler,
      onDidCheckMountOf: () => () => {
        subscriptions++;
        return { dispose: () => void disposed++ };
      },
      mount: async () => ({
        name: 'data',
        volumeId: 'vol-1',
        pluginId: 'hostpath',
        targetPath: TARGET,
        readOnly: false,
        restored: true,
        pluginAway: false,
      }),
    } as unknown as VolumeReconciler;
    const ctx = allocContext({ kind: 'restore', alloc: { volumes: [volume('data', 'vol-1')] } });
    ctx.controller.abort(new ShutdownError('the agent is shutting down'));
    await new CSIHook(volumes, logger).prerun(ctx);
    expect([subscriptions, disposed]).toEqual([1, 1]);
  });

  it('the agent detaching (a ShutdownError abort) ends the listening; a plain abort (the alloc stopping) does not', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    await hook().prerun(ctx);
    ctx.controller.abort(new ShutdownError('the agent is shutting down'));
    csi.crash('hostpath');
    csi.bringUp('hostpath');
    await clock.advance(0);
    await flushMicrotasks(100);
    expect(ctx.events.map((e) => e.type)).toEqual([EVENT_VOLUME_MOUNTED]);

    const stopping = allocContext({ alloc: { id: 'alloc-s', volumes: [volume('data', 'vol-1')] } });
    await hook().prerun(stopping);
    stopping.controller.abort();
    csi.crash('hostpath');
    csi.bringUp('hostpath');
    await clock.advance(0);
    await flushMicrotasks(100);
    expect(stopping.events.map((e) => e.type)).toContain(LIVE_MOUNT_EVENTS.checked);
  });

  it('restore: a mount that is gone (host reboot) is mounted again, and that is a "Volume mounted" event', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    await hook().prerun(allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } }));
    await restartAgent();
    mounts.points.clear(); // host reboot
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] }, kind: 'restore' });
    const result = await hook().prerun(ctx);
    expect(result.volumes?.data?.hostPath).toBe(TARGET);
    expect(ctx.events.map((e) => e.type)).toEqual([EVENT_VOLUME_MOUNTED]);
    expect(await mounts.isMountPoint(TARGET)).toBe(true);
  });

  it('restore: a mount that is gone whose plugin never comes back fails after the restore limit with an error naming volume, plugin and phase', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    await hook().prerun(allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } }));
    await restartAgent();
    mounts.points.clear(); // host reboot: only a mount that is gone waits for the plugin
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] }, kind: 'restore' });
    let settled = false;
    const p = hook()
      .prerun(ctx)
      .catch((e: unknown) => e)
      .finally(() => (settled = true));
    await clock.advance(299_999);
    expect(settled).toBe(false);
    await clock.advance(1);
    const err = (await p) as Error;
    expect(err).toBeInstanceOf(VolumeHookError);
    expect(err.cause).toBeInstanceOf(CSIPluginWaitTimeoutError);
    expect(err.message).toMatch(
      /^volume "data" \(vol-1\) on plugin hostpath: timed out after .* \(restore limit\) waiting for plugin "hostpath" of type csi-node .*; check the plugin task's logs$/,
    );
    // It said it waited, with the limit, before it failed.
    expect(ctx.events).toEqual([
      {
        type: EVENT_WAITING_FOR_PLUGIN,
        message: 'waiting for plugin hostpath (csi-node) to mount volume "data" (vol-1), limit 4m59s',
        time: 0,
      },
      { type: EVENT_VOLUME_MOUNT_FAILED, message: err.message, failed: true, time: 0 },
    ]);
    // Nothing half-mounted; what the record holds is left to the alloc's postrun.
    expect(await mounts.isMountPoint(TARGET)).toBe(false);
    expect(claimer.claims).toHaveLength(1);
    expect(reconciler.pendingUnmounts()).toEqual([]);
  });

  it('an unmount whose plugin stays away past the postrun limit is a "Volume unmount pending" event that says so', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    await hook().prerun(ctx);
    csi.bringDown('hostpath');
    let done = false;
    const p = hook()
      .postrun(ctx)
      .then(() => (done = true));
    await clock.advance(59_999);
    expect(done).toBe(false);
    await clock.advance(1);
    await p;
    expect(ctx.events.at(-1)).toMatchObject({
      type: EVENT_VOLUME_UNMOUNT_PENDING,
      message: expect.stringMatching(
        /^volume "data" \(vol-1\) on plugin hostpath could not be unmounted \(plugin hostpath was not healthy after waiting 1m, the postrun limit\), retrying in the background: plugin "hostpath" of type csi-node not found/,
      ),
    });
    expect(reconciler.pendingUnmounts()).toEqual([expect.objectContaining({ allocId: 'alloc-w', attempts: 1 })]);
  });

  it('an unmount whose plugin nothing runs here any more is not waited for: a "Volume unmount pending" event at once that says so', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const ctx = { ...allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } }), nodePluginExpected: () => false };
    await hook().prerun(ctx);
    csi.bringDown('hostpath');
    await hook().postrun(ctx);
    expect(ctx.events.at(-1)).toMatchObject({
      type: EVENT_VOLUME_UNMOUNT_PENDING,
      message: expect.stringMatching(
        /^volume "data" \(vol-1\) on plugin hostpath could not be unmounted \(plugin hostpath is not running on this node; the volume stays mounted and claimed until the plugin is back\), retrying in the background: /,
      ),
    });
    expect(reconciler.pendingUnmounts()).toEqual([expect.objectContaining({ allocId: 'alloc-w', attempts: 1 })]);
  });

  it('an unmount that fails is a "Volume unmount pending" event; the reconciler keeps it and finishes it later', async () => {
    claimer.add('vol-1');
    csi.bringUp('hostpath');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    await hook().prerun(ctx);
    vm().failNext('unpublish', { error: new Error('plugin busy') });
    await hook().postrun(ctx);
    expect(ctx.events.at(-1)).toEqual({
      type: EVENT_VOLUME_UNMOUNT_PENDING,
      message: 'volume "data" (vol-1) on plugin hostpath could not be unmounted, retrying in the background: plugin busy',
      time: 0,
      details: { volume_id: 'vol-1' },
    });
    expect(logger.find('unmount failed; the volume reconciler retries it in the background', 'warn')).toHaveLength(1);
    expect(reconciler.pendingUnmounts()).toEqual([
      expect.objectContaining({ allocId: 'alloc-w', name: 'data', desired: 'unmounted', lastError: 'plugin busy' }),
    ]);
    expect(claimer.releases).toEqual([]);

    await clock.advance(1_000); // the reconciler's first retry
    expect(reconciler.pendingUnmounts()).toEqual([]);
    expect(claimer.releases).toEqual(['vol-1 alloc-w']);
    expect(ctx.events.filter((e) => e.type === EVENT_VOLUME_UNMOUNT_PENDING)).toHaveLength(1);
  });

  it('an abort while waiting for the plugin rejects prerun with the abort reason, and nothing is claimed', async () => {
    claimer.add('vol-1');
    const ctx = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    const p = hook()
      .prerun(ctx)
      .catch((e: unknown) => e);
    await clock.advance(0);
    expect(csi.pendingWaits).toBe(1);
    const reason = new Error('alloc stopped while its volumes were being mounted');
    ctx.controller.abort(reason);
    const err = (await p) as Error;
    expect(err).toBeInstanceOf(VolumeHookError);
    expect(err.cause).toBe(reason);
    expect(err.message).toBe('volume "data" (vol-1) on plugin hostpath: alloc stopped while its volumes were being mounted');
    expect(ctx.events.at(-1)).toMatchObject({ type: EVENT_VOLUME_MOUNT_FAILED, failed: true });
    expect(claimer.claims).toHaveLength(0);
    expect(csi.pendingWaits).toBe(0);
    expect(reconciler.list()).toEqual([]);

    // Aborted without a reason of its own: an AbortError says so.
    const ctx2 = allocContext({ alloc: { volumes: [volume('data', 'vol-1')] } });
    const p2 = hook()
      .prerun(ctx2)
      .catch((e: unknown) => e);
    ctx2.controller.abort();
    expect(String(await p2)).toMatch(/aborted/);
  });

  it('allocs without csi volumes are left alone', async () => {
    csi.bringUp('hostpath');
    const ctx = allocContext();
    expect(await hook().prerun(ctx)).toEqual({});
    await hook().postrun(ctx);
    expect(csi.waits).toEqual([]);
    expect(claimer.claims).toEqual([]);
    expect(vm().calls).toEqual([]);
    expect(store.writes).toEqual([]);
    expect(ctx.events).toEqual([]);
  });
});
