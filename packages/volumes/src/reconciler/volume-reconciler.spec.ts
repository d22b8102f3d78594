// The volume reconciler driven through what a node lives through: mounts and
// unmounts, its node plugin missing or going away, aborts, the agent dying
// between any two steps and a new agent taking over the same records, staging
// paths shared between allocs, claims refused for now, and a store that
// refuses writes. The reconciler is the real one; the node plugin
// (FakeVolumeManager over a FakeMountTable, standing in for the host's mounts
// and outliving an agent restart as they do), the catalog, the store and the
// clock are fakes.
import { ShutdownError } from '@csiplug/core';
import { flushMicrotasks } from '@csiplug/core/testing';
import { CSIError, GrpcStatus } from '@csiplug/csi';
import { CSIPluginWaitTimeoutError, PluginInstanceNotFoundError } from '@csiplug/csimanager';
import {
  PLUGIN,
  PRERUN,
  RESTORE,
  RO,
  RW,
  TestNode,
  published,
  req,
  staged,
  stagingOf,
  targetOf,
  track,
  unpublished,
  unstaged,
} from '../../test/support/reconciler-node';
import { ClaimError } from '../catalog/volume-claimer';
import { ReconcilerStoppedError, VolumeMountError } from './errors';
import type { MountRetry } from './reconciler-service';

let node: TestNode;
afterEach(() => node?.dispose());

describe('mount', () => {
  test('claims, stages and publishes in that order, each flag persisted before its call goes out', async () => {
    node = new TestNode();
    const { reconciler, vm, claimer } = node;
    const claim = claimer.hangNext('claim');
    const stage = vm.hangNext('stage');
    const publish = vm.hangNext('publish');
    const mounting = reconciler.mount(req('a1'), PRERUN);

    await claim.reached;
    expect(node.record('a1')).toMatchObject({ desired: 'mounted', claimed: true, staged: false, published: false });
    expect(node.calls()).toEqual([]);
    claim.release();
    await stage.reached;
    expect(node.record('a1')).toMatchObject({
      claimed: true,
      publishContext: { attached: 'yes' },
      externalId: 'ext-vol1',
      staged: true,
      published: false,
    });
    expect(node.calls()).toEqual(['stage vol1']);
    stage.release();
    await publish.reached;
    expect(node.record('a1')).toMatchObject({ staged: true, published: true });
    expect(node.record('a1')!.targetPath).toBeUndefined();
    expect(node.mounted()).toEqual([stagingOf()]);
    publish.release();

    const info = await mounting;
    expect(info).toEqual({
      name: 'data',
      volumeId: 'vol1',
      pluginId: PLUGIN,
      targetPath: targetOf('a1'),
      stagingPath: stagingOf(),
      readOnly: false,
      restored: false,
      pluginAway: false,
    });
    expect(node.record('a1')).toEqual({
      allocId: 'a1',
      name: 'data',
      volumeId: 'vol1',
      externalId: 'ext-vol1',
      pluginId: PLUGIN,
      usage: RW,
      desired: 'mounted',
      claimed: true,
      publishContext: { attached: 'yes' },
      staged: true,
      published: true,
      targetPath: targetOf('a1'),
      stagingPath: stagingOf(),
      attempts: 0,
      since: node.clock.now(),
    });
    expect(claimer.claims).toEqual([
      { volumeId: 'vol1', allocId: 'a1', readOnly: false, accessMode: 'single-node-writer', attachmentMode: 'file-system' },
    ]);
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1']);
    // The plugin is asked with its own id for the volume and the controller's publish context.
    expect(vm.requests.map((r) => [r.volume.externalId, r.publishContext])).toEqual([
      ['ext-vol1', { attached: 'yes' }],
      ['ext-vol1', { attached: 'yes' }],
    ]);
    expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
    expect(reconciler.mounted('a1')).toEqual([info]);
    expect(reconciler.pendingUnmounts()).toEqual([]);
    expect(node.csi.waits).toEqual([{ type: 'csi-node', name: PLUGIN, phase: 'prerun' }]);
  });

  test('a repeated mount is a no-op: the same answer, no claim, no step, no write', async () => {
    node = new TestNode();
    const first = await node.reconciler.mount(req('a1'), PRERUN);
    const writes = node.store.writes.length;
    const again = await node.reconciler.mount(req('a1'), PRERUN);
    expect(again).toEqual(first);
    expect(node.claimer.claims).toHaveLength(1);
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1']);
    expect(node.store.writes).toHaveLength(writes);
  });

  test('a plugin that does not stage is not staged, on mount or on unmount', async () => {
    node = new TestNode();
    node.vm.staging = false;
    const info = await node.reconciler.mount(req('a1'), PRERUN);
    expect(info.stagingPath).toBeUndefined();
    expect(node.record('a1')).toMatchObject({ staged: false, published: true, targetPath: targetOf('a1') });
    expect(node.record('a1')!.stagingPath).toBeUndefined();
    expect(await node.reconciler.unmount('a1')).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN }]);
    expect(node.calls()).toEqual(['publish vol1 a1', 'unpublish vol1 a1']);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
    expect(node.store.list().records).toEqual([]);
    expect(node.mounted()).toEqual([]);
  });

  test("the plugin wait uses the phase's limit (prerun, restore) and fails with an error naming the volume, the plugin and the phase", async () => {
    node = new TestNode({ pluginUp: false });
    const prerun = track(node.reconciler.mount(req('a1'), PRERUN));
    await node.clock.advance(59_999);
    expect(prerun.settled).toBe(false);
    await node.clock.advance(1);
    expect(prerun.error).toBeInstanceOf(VolumeMountError);
    expect((prerun.error as Error).message).toMatch(
      /^volume "data" \(vol1\) on plugin hostpath: timed out after 1m \(prerun limit\) waiting for plugin "hostpath" of type csi-node/,
    );
    expect((prerun.error as Error).cause).toBeInstanceOf(CSIPluginWaitTimeoutError);

    const restore = track(node.reconciler.mount(req('a2'), RESTORE));
    await node.clock.advance(60_000);
    expect(restore.settled).toBe(false);
    await node.clock.advance(239_999);
    expect(restore.settled).toBe(false);
    await node.clock.advance(1);
    expect((restore.error as Error).message).toMatch(/^volume "data" \(vol1\) on plugin hostpath: timed out after 5m \(restore limit\)/);
    expect(node.csi.waits.map((w) => w.phase)).toEqual(['prerun', 'restore']);

    // Nothing was done, so nothing is undone: no claim, no release, no step, no record left.
    expect(node.claimer.claims).toEqual([]);
    expect(node.claimer.releases).toEqual([]);
    expect(node.calls()).toEqual([]);
    expect(node.store.list()).toEqual({ records: [], failures: [] });
    expect(node.reconciler.pendingUnmounts()).toEqual([]);
  });

  test('an unknown volume fails at once with an error naming it, before any wait or write', async () => {
    node = new TestNode();
    const err = await node.reconciler.mount(req('a1', { volumeId: 'nope' }), PRERUN).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeMountError);
    expect(err).toMatchObject({ code: 'EVOLUME_MOUNT', volumeName: 'data', volumeId: 'nope' });
    expect((err as Error).message).toBe(
      'volume "data" (nope): volume "nope" is not registered; register it ("csiplug volume register FILE") or create it ("csiplug volume create FILE")',
    );
    expect(node.csi.waits).toEqual([]);
    expect(node.store.writes).toEqual([]);
  });

  test('a mount asked of a disposed reconciler fails with a ReconcilerStoppedError, a ShutdownError, as its cause, and writes nothing', async () => {
    node = new TestNode();
    node.reconciler.dispose();
    const err = await node.reconciler.mount(req('a1'), PRERUN).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeMountError);
    const cause = (err as VolumeMountError).cause;
    expect(cause).toBeInstanceOf(ReconcilerStoppedError);
    expect(cause).toBeInstanceOf(ShutdownError);
    expect(cause).toMatchObject({
      code: 'ESHUTDOWN',
      name: 'ReconcilerStoppedError',
      message: 'the volume reconciler is stopped; the agent is shutting down',
    });
    expect(node.csi.waits).toEqual([]);
    expect(node.store.writes).toEqual([]);
  });

  test('a name the alloc already uses for another volume is refused, and the mounted volume is left alone', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const before = node.record('a1');
    await expect(node.reconciler.mount(req('a1', { volumeId: 'vol2' }), PRERUN)).rejects.toThrow(
      'volume "data" (vol2) on plugin hostpath: alloc a1 already has volume "vol1" as "data"; it cannot also mount "vol2" under that name',
    );
    expect(node.record('a1')).toEqual(before);
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1']);
    expect(node.claimer.releases).toEqual([]);
  });
});

describe('plugin absence', () => {
  test('mount waits for the plugin and goes on as soon as it comes up, without the clock moving', async () => {
    node = new TestNode({ pluginUp: false });
    const mounting = track(node.reconciler.mount(req('a1'), PRERUN));
    await node.clock.advance(30_000);
    expect(mounting.settled).toBe(false);
    expect(node.claimer.claims).toEqual([]);
    expect(node.record('a1')).toMatchObject({ desired: 'mounted', claimed: false, staged: false, published: false });
    node.csi.bringUp(PLUGIN);
    const info = await mounting.promise;
    expect(info.targetPath).toBe(targetOf('a1'));
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1']);
  });

  test('an unmount while the plugin is down waits for it up to the postrun limit, then fails its first attempt, stays pending, is retried with backoff and at once when the plugin turns healthy', async () => {
    node = new TestNode();
    const { reconciler } = node;
    await reconciler.mount(req('a1'), PRERUN);
    node.csi.bringDown(PLUGIN);

    const unmounting = track(reconciler.unmount('a1'));
    await node.clock.advance(29_999);
    expect(unmounting.settled).toBe(false);
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1']);
    expect(node.record('a1')).toMatchObject({ desired: 'unmounted', attempts: 0 });
    await node.clock.advance(1);
    const outcomes = await unmounting.promise;
    expect(outcomes).toEqual([
      {
        name: 'data',
        volumeId: 'vol1',
        pluginId: PLUGIN,
        error: expect.any(PluginInstanceNotFoundError),
        pluginWait: { waitedMs: 30_000, healthy: false },
      },
    ]);
    expect(
      node.logger.find(
        'the node plugin was not healthy within 30s (the postrun limit); unmounting anyway, retried in the background if it fails',
        'warn',
      ),
    ).toHaveLength(1);
    const pending = () => reconciler.pendingUnmounts();
    expect(pending()).toEqual([
      expect.objectContaining({
        allocId: 'a1',
        name: 'data',
        desired: 'unmounted',
        claimed: true,
        staged: true,
        published: true,
        attempts: 1,
        lastError: expect.stringContaining('plugin "hostpath" of type csi-node not found'),
      }),
    ]);
    expect(node.record('a1')).toEqual(pending()[0]);
    expect(reconciler.mounted('a1')).toEqual([]);

    // Backoff from the policy: 1s, then 2s, then 4s.
    await node.clock.advance(999);
    expect(pending()[0]!.attempts).toBe(1);
    await node.clock.advance(1);
    expect(pending()[0]!.attempts).toBe(2);
    await node.clock.advance(1_999);
    expect(pending()[0]!.attempts).toBe(2);
    await node.clock.advance(1);
    expect(pending()[0]!.attempts).toBe(3);

    // The plugin is back: retried now, not when the 4s backoff ends.
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(pending()).toEqual([]);
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1', 'unpublish vol1 a1', 'unstage vol1']);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
    expect(node.store.list().records).toEqual([]);
    expect(node.mounted()).toEqual([]);
    // Past the postrun limit a failure is an error in the log; the retries go on all the same.
    expect(node.logger.find('unmount failed; retrying in the background', 'warn')).toHaveLength(1);
    expect(node.logger.find('unmount still failing after 30s; still retrying', 'error')).toHaveLength(2);
  });

  test('a release the catalog refuses is retried; the record stays until the claim is released', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.claimer.failReleases = 1;
    const [outcome] = await node.reconciler.unmount('a1');
    expect((outcome!.error as Error).message).toMatch(/stays published for alloc a1/);
    expect(node.record('a1')).toMatchObject({ desired: 'unmounted', claimed: true, staged: false, published: false, attempts: 1 });
    expect(node.mounted()).toEqual([]);
    await node.clock.advance(1_000);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
    expect(node.store.list().records).toEqual([]);
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1', 'unpublish vol1 a1', 'unstage vol1']);
  });
});

describe('abort', () => {
  const reason = new Error('alloc a1 was stopped');

  interface AbortCase {
    during: string;
    pluginUp?: boolean;
    /** Makes the mount stop at that point; resolves once it has. */
    hold(node: TestNode): () => Promise<void>;
    /** The steps asked of the plugin, the undoing included. */
    calls: string[];
    releases: string[];
  }

  const cases: AbortCase[] = [
    {
      during: 'the plugin wait',
      pluginUp: false,
      hold: (n) => async () => {
        await flushMicrotasks();
        expect(n.csi.pendingWaits).toBe(1);
      },
      calls: [],
      releases: [],
    },
    { during: 'the claim', hold: (n) => () => n.claimer.hangNext('claim').reached, calls: [], releases: ['vol1 a1'] },
    {
      during: 'the claim, once the catalog granted it',
      hold: (n) => () => n.claimer.hangNext('claim', { after: true }).reached,
      calls: [],
      releases: ['vol1 a1'],
    },
    {
      during: 'a hanging stage',
      hold: (n) => () => n.vm.hangNext('stage').reached,
      calls: ['stage vol1', 'unstage vol1'],
      releases: ['vol1 a1'],
    },
    {
      during: 'a stage that mounted and did not answer',
      hold: (n) => () => n.vm.hangNext('stage', { after: true }).reached,
      calls: ['stage vol1', 'unstage vol1'],
      releases: ['vol1 a1'],
    },
    {
      during: 'a hanging publish',
      hold: (n) => () => n.vm.hangNext('publish').reached,
      calls: ['stage vol1', 'publish vol1 a1', 'unpublish vol1 a1', 'unstage vol1'],
      releases: ['vol1 a1'],
    },
    {
      during: 'a publish that mounted and did not answer',
      hold: (n) => () => n.vm.hangNext('publish', { after: true }).reached,
      calls: ['stage vol1', 'publish vol1 a1', 'unpublish vol1 a1', 'unstage vol1'],
      releases: ['vol1 a1'],
    },
  ];

  test.each(cases.map((c) => [c.during, c] as const))(
    'aborted during %s: mount rejects with the reason, naming volume and plugin, and leaves nothing behind',
    async (_, c) => {
      node = new TestNode({ pluginUp: c.pluginUp ?? true });
      const reached = c.hold(node);
      const ac = new AbortController();
      const mounting = node.reconciler.mount(req('a1'), { phase: 'prerun', signal: ac.signal });
      await reached();
      ac.abort(reason);
      const err = await mounting.catch((e: unknown) => e);
      // Reported at once; the undo runs in the background (it may queue behind another alloc's step).
      await node.settle();
      expect(err).toBeInstanceOf(VolumeMountError);
      expect((err as Error).cause).toBe(reason);
      expect((err as Error).message).toBe('volume "data" (vol1) on plugin hostpath: alloc a1 was stopped');
      expect(node.calls()).toEqual(c.calls);
      expect(node.claimer.releases).toEqual(c.releases);
      expect(node.store.list().records).toEqual([]);
      expect(node.reconciler.list()).toEqual([]);
      expect(node.mounted()).toEqual([]);
    },
  );

  test("aborted while queued behind another alloc's hanging mount of the same volume: rejects at once, having done nothing", async () => {
    node = new TestNode();
    const publish = node.vm.hangNext('publish');
    const first = track(node.reconciler.mount(req('a1'), PRERUN));
    await publish.reached;
    const ac = new AbortController();
    const second = track(node.reconciler.mount(req('a2'), { phase: 'prerun', signal: ac.signal }));
    await node.settle();
    ac.abort(new Error('alloc a2 was stopped'));
    await node.settle();
    expect(second.settled).toBe(true);
    expect((second.error as Error).message).toBe('volume "data" (vol1) on plugin hostpath: alloc a2 was stopped');
    // The claim ran outside the volume's queue; its undo waits in the queue behind a1's publish.
    expect(node.claimer.claims.map((c) => c.allocId)).toEqual(['a1', 'a2']);
    expect(node.record('a2')).toMatchObject({ desired: 'unmounted', claimed: true, staged: false, published: false });
    publish.release();
    await first.promise;
    await node.settle();
    expect(node.record('a2')).toBeUndefined();
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1']);
    expect(node.claimer.releases).toEqual(['vol1 a2']);
  });
});

describe('the agent dies between two steps; a new one takes over the same records', () => {
  /** A point where the old agent stops for good (a call that never returns), and what the new agent must then do. */
  interface CrashCase {
    at: string;
    /** Starts the old agent's operation so that it stops at the point; resolves once it has. */
    crash(node: TestNode): Promise<void>;
    /** The steps the new agent asks of the plugin. */
    calls: string[];
    /** What they change on the node (no duplicate stage or publish of a live mount). */
    changes: string[];
    /** Claims the new agent asks of the catalog / releases it makes. */
    claims: number;
    releases: string[];
  }

  /** `undo`: the steps an unmount without a restore asks of the plugin (what the records say may have been done). */
  const mountCrashes: (CrashCase & { restored: boolean; pluginUp?: boolean; undo: string[]; released: boolean })[] = [
    {
      at: 'while waiting for the plugin (record written, nothing done)',
      pluginUp: false,
      crash: async (n) => {
        void n.reconciler.mount(req('a1'), PRERUN).catch(() => undefined);
        await flushMicrotasks();
        expect(n.csi.pendingWaits).toBe(1);
      },
      calls: ['stage vol1', 'publish vol1 a1'],
      changes: [staged(), published('a1')],
      claims: 1,
      releases: [],
      restored: false,
      undo: [],
      released: false,
    },
    ...(
      [
        ['after the claim was asked, before the catalog had it', { after: false }],
        ['after the claim was granted, before the answer was recorded', { after: true }],
      ] as const
    ).map(([at, opts]) => ({
      at,
      crash: async (n: TestNode) => {
        const hang = n.claimer.hangNext('claim', opts);
        void n.reconciler.mount(req('a1'), PRERUN);
        await hang.reached;
      },
      calls: ['stage vol1', 'publish vol1 a1'],
      changes: [staged(), published('a1')],
      claims: 1,
      releases: [],
      restored: false,
      undo: [],
      released: true,
    })),
    {
      at: 'after the stage was asked, before it mounted',
      crash: async (n) => {
        const hang = n.vm.hangNext('stage');
        void n.reconciler.mount(req('a1'), PRERUN);
        await hang.reached;
      },
      calls: ['stage vol1', 'publish vol1 a1'],
      changes: [staged(), published('a1')],
      claims: 1,
      releases: [],
      restored: false,
      undo: ['unstage vol1'],
      released: true,
    },
    {
      at: 'after the stage mounted, before it was recorded',
      crash: async (n) => {
        const hang = n.vm.hangNext('stage', { after: true });
        void n.reconciler.mount(req('a1'), PRERUN);
        await hang.reached;
      },
      calls: ['stage vol1', 'publish vol1 a1'],
      changes: [published('a1')],
      claims: 1,
      releases: [],
      restored: false,
      undo: ['unstage vol1'],
      released: true,
    },
    {
      at: 'after the publish was asked, before it mounted',
      crash: async (n) => {
        const hang = n.vm.hangNext('publish');
        void n.reconciler.mount(req('a1'), PRERUN);
        await hang.reached;
      },
      calls: ['stage vol1', 'publish vol1 a1'],
      changes: [published('a1')],
      claims: 1,
      releases: [],
      restored: false,
      undo: ['unpublish vol1 a1', 'unstage vol1'],
      released: true,
    },
    {
      at: 'after the publish mounted, before it was recorded',
      crash: async (n) => {
        const hang = n.vm.hangNext('publish', { after: true });
        void n.reconciler.mount(req('a1'), PRERUN);
        await hang.reached;
      },
      calls: ['stage vol1', 'publish vol1 a1'],
      changes: [],
      claims: 1,
      releases: [],
      restored: false,
      undo: ['unpublish vol1 a1', 'unstage vol1'],
      released: true,
    },
    {
      at: 'after the mount was recorded',
      crash: async (n) => {
        await n.reconciler.mount(req('a1'), PRERUN);
      },
      calls: [],
      changes: [],
      claims: 0,
      releases: [],
      restored: true,
      undo: ['unpublish vol1 a1', 'unstage vol1'],
      released: true,
    },
  ];

  test.each(mountCrashes.map((c) => [c.at, c] as const))(
    'mount, crash %s: the restore ends mounted, asking only what is left',
    async (_, c) => {
      node = new TestNode({ pluginUp: c.pluginUp ?? true });
      await c.crash(node);
      const desiredBefore = node.record('a1')!.desired;
      expect(desiredBefore).toBe('mounted');
      const calls = node.calls().length;
      const changes = node.changes().length;
      const claims = node.claimer.claims.length;
      const releases = node.claimer.releases.length;

      const agent = node.restart();
      await node.settle();
      // start() leaves a record desired mounted to its alloc's restore.
      expect(node.calls()).toHaveLength(calls);
      if (!(c.pluginUp ?? true)) node.csi.bringUp(PLUGIN);
      const info = await agent.mount(req('a1'), RESTORE);

      expect(info).toEqual({
        name: 'data',
        volumeId: 'vol1',
        pluginId: PLUGIN,
        targetPath: targetOf('a1'),
        stagingPath: stagingOf(),
        readOnly: false,
        restored: c.restored,
        pluginAway: false,
      });
      expect(node.calls().slice(calls)).toEqual(c.calls);
      expect(node.changes().slice(changes)).toEqual(c.changes);
      expect(node.claimer.claims.length - claims).toBe(c.claims);
      expect(node.claimer.releases.slice(releases)).toEqual(c.releases);
      expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
      expect(node.record('a1')).toMatchObject({
        desired: 'mounted',
        claimed: true,
        staged: true,
        published: true,
        targetPath: targetOf('a1'),
        stagingPath: stagingOf(),
      });
      // A live mount is kept without a plugin wait; one to mount (again) waits with the restore limit.
      if (c.restored) expect(node.csi.waits.filter((w) => w.phase === 'restore')).toEqual([]);
      else expect(node.csi.waits.at(-1)).toEqual({ type: 'csi-node', name: PLUGIN, phase: 'restore' });

      // And it comes down cleanly from there.
      expect(await agent.unmount('a1')).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN }]);
      expect(node.mounted()).toEqual([]);
      expect(node.store.list().records).toEqual([]);
      expect(node.claimer.releases.slice(releases)).toEqual(['vol1 a1']);
    },
  );

  test.each(mountCrashes.map((c) => [c.at, c] as const))(
    'mount, crash %s: the alloc unmounting without a restore undoes all that may have been done',
    async (_, c) => {
      // The alloc was stopped while the agent was down: its postrun unmounts from the records alone.
      node = new TestNode({ pluginUp: c.pluginUp ?? true });
      await c.crash(node);
      const calls = node.calls().length;
      const releases = node.claimer.releases.length;
      const agent = node.restart();
      node.csi.bringUp(PLUGIN);
      expect(await agent.unmount('a1')).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN }]);
      expect(node.calls().slice(calls)).toEqual(c.undo);
      expect(node.claimer.releases.slice(releases)).toEqual(c.released ? ['vol1 a1'] : []);
      expect(node.mounted()).toEqual([]);
      expect(node.store.list()).toEqual({ records: [], failures: [] });
      expect(agent.pendingUnmounts()).toEqual([]);
    },
  );

  const unmountCrashes: (CrashCase & { pluginDown?: boolean })[] = [
    {
      at: 'after its first attempt failed for want of the plugin (retry pending)',
      pluginDown: true,
      crash: async (n) => {
        n.csi.bringDown(PLUGIN);
        const unmounting = n.reconciler.unmount('a1');
        await n.clock.advance(n.timeouts.pluginWait('postrun'));
        const [outcome] = await unmounting;
        expect(outcome!.error).toBeInstanceOf(PluginInstanceNotFoundError);
      },
      calls: ['unpublish vol1 a1', 'unstage vol1'],
      changes: [unpublished('a1'), unstaged()],
      claims: 0,
      releases: ['vol1 a1'],
    },
    {
      at: 'after the unpublish was asked, before it unmounted',
      crash: async (n) => {
        const hang = n.vm.hangNext('unpublish');
        void n.reconciler.unmount('a1');
        await hang.reached;
      },
      calls: ['unpublish vol1 a1', 'unstage vol1'],
      changes: [unpublished('a1'), unstaged()],
      claims: 0,
      releases: ['vol1 a1'],
    },
    {
      at: 'after the unpublish unmounted, before it was recorded',
      crash: async (n) => {
        const hang = n.vm.hangNext('unpublish', { after: true });
        void n.reconciler.unmount('a1');
        await hang.reached;
      },
      calls: ['unpublish vol1 a1', 'unstage vol1'],
      changes: [unstaged()],
      claims: 0,
      releases: ['vol1 a1'],
    },
    {
      at: 'after the unstage was asked, before it unmounted',
      crash: async (n) => {
        const hang = n.vm.hangNext('unstage');
        void n.reconciler.unmount('a1');
        await hang.reached;
      },
      calls: ['unstage vol1'],
      changes: [unstaged()],
      claims: 0,
      releases: ['vol1 a1'],
    },
    {
      at: 'after the unstage unmounted, before it was recorded',
      crash: async (n) => {
        const hang = n.vm.hangNext('unstage', { after: true });
        void n.reconciler.unmount('a1');
        await hang.reached;
      },
      calls: ['unstage vol1'],
      changes: [],
      claims: 0,
      releases: ['vol1 a1'],
    },
    {
      at: 'after the release was asked, before the catalog had it',
      crash: async (n) => {
        const hang = n.claimer.hangNext('release');
        void n.reconciler.unmount('a1');
        await hang.reached;
      },
      calls: [],
      changes: [],
      claims: 0,
      releases: ['vol1 a1'],
    },
    {
      at: 'after the catalog released the claim, before it was recorded',
      crash: async (n) => {
        const hang = n.claimer.hangNext('release', { after: true });
        void n.reconciler.unmount('a1');
        await hang.reached;
      },
      // Released again: a release of a claim that is gone is not an error.
      calls: [],
      changes: [],
      claims: 0,
      releases: ['vol1 a1'],
    },
  ];

  test.each(unmountCrashes.map((c) => [c.at, c] as const))(
    'unmount, crash %s: start() alone finishes it, asking only what is left',
    async (_, c) => {
      node = new TestNode();
      await node.reconciler.mount(req('a1'), PRERUN);
      await c.crash(node);
      expect(node.record('a1')!.desired).toBe('unmounted');
      const calls = node.calls().length;
      const changes = node.changes().length;
      const claims = node.claimer.claims.length;
      const releases = node.claimer.releases.length;

      const agent = node.restart();
      if (c.pluginDown) {
        // Still down: the resumed attempt fails and waits; the plugin's return retries it at once.
        await node.settle();
        expect(agent.pendingUnmounts()).toEqual([expect.objectContaining({ allocId: 'a1', attempts: 2 })]);
        node.csi.bringUp(PLUGIN);
      }
      await node.settle();

      expect(agent.pendingUnmounts()).toEqual([]);
      expect(agent.list()).toEqual([]);
      expect(node.store.list()).toEqual({ records: [], failures: [] });
      expect(node.mounted()).toEqual([]);
      expect(node.calls().slice(calls)).toEqual(c.calls);
      expect(node.changes().slice(changes)).toEqual(c.changes);
      expect(node.claimer.claims.length - claims).toBe(c.claims);
      expect(node.claimer.releases.slice(releases)).toEqual(c.releases);
      expect(node.logger.find('resuming unmounts left by the last agent', 'info')).toHaveLength(1);
    },
  );
});

describe('restart with a live mount', () => {
  test('a record published before the restart whose target is still mounted is returned restored, with no claim, stage or publish', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a1', { name: 'logs', volumeId: 'vol2', usage: RO }), PRERUN);
    const calls = node.calls();
    const agent = node.restart();
    const restored = await Promise.all([
      agent.mount(req('a1'), RESTORE),
      agent.mount(req('a1', { name: 'logs', volumeId: 'vol2', usage: RO }), RESTORE),
    ]);
    expect(restored.map((i) => [i.name, i.restored, i.targetPath])).toEqual([
      ['data', true, targetOf('a1')],
      ['logs', true, targetOf('a1', RO, 'vol2')],
    ]);
    expect(node.calls()).toEqual(calls);
    expect(node.claimer.claims).toHaveLength(2);
    expect(
      agent
        .mounted('a1')
        .map((i) => i.name)
        .sort(),
    ).toEqual(['data', 'logs']);
    expect(node.logger.find('volume still mounted after restore')).toHaveLength(2);
    // Asked again in the same agent, it is known mounted: not "restored" a second time.
    expect((await agent.mount(req('a1'), RESTORE)).restored).toBe(false);
  });

  test.each([
    ['a host reboot took both the target and the staging mount', [targetOf('a1'), stagingOf()], [staged(), published('a1')]],
    ['the target was unmounted behind its back, the staging mount is still there', [targetOf('a1')], [published('a1')]],
  ] as const)('one whose mount is gone (%s) is claimed and mounted again', async (_, gone, changes) => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const calls = node.calls().length;
    const done = node.changes().length;
    const agent = node.restart();
    for (const p of gone) node.mounts.unmark(p);
    const info = await agent.mount(req('a1'), RESTORE);
    expect(info).toMatchObject({ restored: false, targetPath: targetOf('a1') });
    expect(node.claimer.claims).toHaveLength(2);
    expect(node.calls().slice(calls)).toEqual(['stage vol1', 'publish vol1 a1']);
    expect(node.changes().slice(done)).toEqual(changes);
    expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
    expect(node.logger.find('volume mount gone after restore; mounting again', 'warn')).toHaveLength(1);
  });
});

describe('plugin away', () => {
  test('restore: a live mount is kept at once without its plugin (pluginAway), never torn down however long the plugin stays away, and checked when it is back', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const calls = node.calls();
    node.csi.bringDown(PLUGIN);
    const agent = node.restart();
    const waits = node.csi.waits.length;

    const info = await agent.mount(req('a1'), RESTORE);
    expect(info).toEqual({
      name: 'data',
      volumeId: 'vol1',
      pluginId: PLUGIN,
      targetPath: targetOf('a1'),
      stagingPath: stagingOf(),
      readOnly: false,
      restored: true,
      pluginAway: true,
    });
    expect(node.csi.waits.length).toBe(waits);
    expect(agent.mounted('a1')).toEqual([{ ...info, restored: false }]);

    // Twice the restore limit: nothing is waited for, nothing is undone.
    await node.clock.advance(2 * node.timeouts.pluginWait('restore'));
    await node.settle();
    expect(node.calls()).toEqual(calls);
    expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
    expect(node.record('a1')).toMatchObject({ desired: 'mounted', claimed: true, staged: true, published: true });
    expect(agent.pendingUnmounts()).toEqual([]);
    expect(node.claimer.releases).toEqual([]);

    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.checks.map((e) => e.kind)).toEqual(['plugin-back', 'checked']);
    expect(agent.mounted('a1')[0]!.pluginAway).toBe(false);
  });

  test('a node plugin that stops serving under live mounts: each mount says so (and stays), once; a plugin that never served them says nothing', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    const calls = node.calls();
    node.csi.crash(PLUGIN);
    await node.settle();
    expect(node.aways.map((e) => `${e.kind} ${e.allocId}`).sort()).toEqual(['plugin-away a1', 'plugin-away a2']);
    expect(node.aways[0]!.message).toMatch(
      new RegExp(
        `^plugin ${PLUGIN} is away \\(fingerprint failed: UNAVAILABLE \\(injected\\)\\); volume "data" \\(vol1\\) stays mounted at .+, and is checked when the plugin is back$`,
      ),
    );
    // Still away: nothing more is said, nothing is undone.
    node.csi.crash(PLUGIN);
    await node.settle();
    expect(node.aways).toHaveLength(2);
    expect(node.calls()).toEqual(calls);
    expect(node.mounted()).toContain(targetOf('a1'));
    expect(node.reconciler.mountChecks('a1')[0]!.state).toBe('plugin-away');
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.checks.map((e) => `${e.kind} ${e.allocId}`)).toEqual(['plugin-back a1', 'plugin-back a2', 'checked a1', 'checked a2']);
  });

  test("an alloc's own listener hears only its mounts' checks, and its emitter goes with its last listener", async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    node.csi.bringDown(PLUGIN);
    const agent = node.restart();
    await agent.mount(req('a1'), RESTORE);
    await agent.mount(req('a2'), RESTORE);
    const heard: string[] = [];
    const sub = agent.onDidCheckMountOf('a1')((e) => heard.push(`${e.kind} ${e.allocId}`));
    // The per-alloc emitters live in the reconciler's LiveMountEvents (live-mount-events.ts).
    const internals = (agent as unknown as { liveEvents: { byAlloc: Map<string, unknown> } }).liveEvents;
    expect([...internals.byAlloc.keys()]).toEqual(['a1']);
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.checks.map((e) => `${e.kind} ${e.allocId}`).sort()).toEqual([
      'checked a1',
      'checked a2',
      'plugin-back a1',
      'plugin-back a2',
    ]);
    expect(heard).toEqual(['plugin-back a1', 'checked a1']);
    sub.dispose();
    expect(internals.byAlloc.size).toBe(0);
    // Listening again after the last one left hears the next checks.
    const again: string[] = [];
    const sub2 = agent.onDidCheckMountOf('a1')((e) => again.push(e.kind));
    node.csi.bringDown(PLUGIN);
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(again).toEqual(['plugin-away', 'plugin-back', 'checked']);
    // Disposed with a listener attached: the listener's own dispose after it is harmless, and a late subscribe holds nothing.
    agent.dispose();
    expect(internals.byAlloc.size).toBe(0);
    expect(() => sub2.dispose()).not.toThrow();
    agent.onDidCheckMountOf('a2')(() => undefined);
    expect(internals.byAlloc.size).toBe(0);
  });

  test('restore: a target whose mount check errors (ENOTCONN of a dead FUSE mount) is kept as mounted, maybe stale — never a failed restore — and checked when the plugin is back', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const calls = node.calls();
    node.csi.bringDown(PLUGIN);
    const agent = node.restart();
    node.mounts.failMountCheck(targetOf('a1'), 'ENOTCONN');
    node.mounts.failStat(targetOf('a1'), 'ENOTCONN');
    const info = await agent.mount(req('a1'), RESTORE);
    expect(info).toMatchObject({ restored: true, pluginAway: true, targetPath: targetOf('a1') });
    expect(
      node.logger.find(
        'could not tell whether a restored volume mount is still in place; kept as mounted (maybe stale) and checked when its plugin serves',
        'warn',
      ),
    ).toHaveLength(1);
    await node.clock.advance(2 * node.timeouts.pluginWait('restore'));
    await node.settle();
    expect(node.calls()).toEqual(calls);
    expect(node.record('a1')).toMatchObject({ desired: 'mounted', published: true });

    node.mounts.clearMountCheck(targetOf('a1'));
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.checks.map((e) => `${e.kind} ${e.allocId}`)).toEqual(['plugin-back a1', 'stale a1', 'remounted a1']);
  });

  test('restore: a mount that is gone waits for the plugin (the restore limit), then fails as a VolumeMountError with nothing half-mounted', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const calls = node.calls();
    node.csi.bringDown(PLUGIN);
    const agent = node.restart();
    node.mounts.points.clear(); // a host reboot
    const restoring = track(agent.mount(req('a1'), RESTORE));
    await node.clock.advance(node.timeouts.pluginWait('restore') - 1);
    expect(restoring.settled).toBe(false);
    await node.clock.advance(1);
    await node.settle();
    expect(restoring.error).toBeInstanceOf(VolumeMountError);
    expect((restoring.error as Error).message).toMatch(/^volume "data" \(vol1\) on plugin hostpath: timed out after 5m \(restore limit\)/);
    expect(node.logger.find('volume mount gone after restore; waiting for its plugin to mount it again', 'warn')).toHaveLength(1);
    expect(node.calls()).toEqual(calls);
    expect(node.mounted()).toEqual([]);
    expect(node.claimer.claims).toHaveLength(1);
    // Left for the alloc's unmount, which undoes what the record says.
    expect(node.record('a1')).toMatchObject({ desired: 'mounted' });
  });

  test('mid-mount: a plugin that crashes during the publish is waited for, and the publish asked again once it is back; one claim', async () => {
    node = new TestNode();
    const publish = node.vm.hangNext('publish');
    const retries: MountRetry[] = [];
    const mounting = track(node.reconciler.mount(req('a1'), { ...PRERUN, onRetry: (r) => retries.push(r) }));
    await publish.reached;
    node.csi.crash(PLUGIN);
    publish.release();
    await node.settle();
    expect(mounting.settled).toBe(false);
    expect(
      node.logger.find('the node plugin went away during the mount; waiting for it to be healthy, then asking again', 'warn'),
    ).toHaveLength(1);
    expect(retries).toEqual([
      expect.objectContaining({ name: 'data', volumeId: 'vol1', pluginId: 'hostpath', reason: 'plugin', attempt: 1 }),
    ]);
    await node.clock.advance(30_000);
    expect(mounting.settled).toBe(false);
    node.csi.bringUp(PLUGIN);
    const info = await mounting.promise;
    expect(info).toMatchObject({ targetPath: targetOf('a1'), restored: false, pluginAway: false });
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1', 'stage vol1', 'publish vol1 a1']);
    expect(node.claimer.claims).toHaveLength(1);
    expect(node.claimer.releases).toEqual([]);
    expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
  });

  test('mid-mount: a step the plugin does not answer (UNAVAILABLE) while it still looks healthy is asked again after a backoff', async () => {
    node = new TestNode();
    node.vm.failNext('stage', {
      error: new CSIError({ grpcCode: GrpcStatus.UNAVAILABLE, method: 'NodeStageVolume', endpoint: 'fake', details: 'connection refused' }),
    });
    const mounting = track(node.reconciler.mount(req('a1'), PRERUN));
    await node.settle();
    expect(mounting.settled).toBe(false);
    await node.clock.advance(node.timeouts.unmountBackoff(1));
    const info = await mounting.promise;
    expect(info.targetPath).toBe(targetOf('a1'));
    expect(node.calls()).toEqual(['stage vol1', 'stage vol1', 'publish vol1 a1']);
  });

  test('mid-mount: a plugin that crashes during the publish and stays away past the limit fails the mount; the undo waits for the plugin, unstages, and only then releases the claim', async () => {
    node = new TestNode();
    const publish = node.vm.hangNext('publish');
    const mounting = track(node.reconciler.mount(req('a1'), PRERUN));
    await publish.reached;
    node.csi.crash(PLUGIN);
    publish.release();
    await node.clock.advance(node.timeouts.pluginWait('prerun'));
    await node.settle();
    expect(mounting.error).toBeInstanceOf(VolumeMountError);
    expect((mounting.error as Error).message).toMatch(/prerun limit/);
    // The staging mount is still there, and so is the claim: the undo is pending, not forgotten.
    expect(node.mounted()).toEqual([stagingOf()]);
    expect(node.claimer.releases).toEqual([]);
    expect(node.reconciler.pendingUnmounts()).toEqual([
      expect.objectContaining({ allocId: 'a1', desired: 'unmounted', claimed: true, staged: true, published: true, attempts: 1 }),
    ]);
    expect(node.logger.find('could not undo a failed mount; retrying in the background', 'error')).toHaveLength(1);

    node.csi.bringUp(PLUGIN);
    await node.settle();
    // The undo's first attempt (failed, the plugin away), then the one its return woke.
    expect(node.calls().slice(2)).toEqual(['unpublish vol1 a1', 'unpublish vol1 a1', 'unstage vol1']);
    expect(node.mounted()).toEqual([]);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
    expect(node.store.list().records).toEqual([]);
  });

  test('postrun: an unmount asked during a short plugin restart waits for the plugin and unmounts cleanly, nothing pending', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.csi.crash(PLUGIN);
    const unmounting = track(node.reconciler.unmount('a1'));
    await node.clock.advance(10_000);
    expect(unmounting.settled).toBe(false);
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1']);
    node.csi.bringUp(PLUGIN);
    expect(await unmounting.promise).toEqual([
      { name: 'data', volumeId: 'vol1', pluginId: PLUGIN, pluginWait: { waitedMs: 10_000, healthy: true } },
    ]);
    expect(node.calls().slice(2)).toEqual(['unpublish vol1 a1', 'unstage vol1']);
    expect(node.reconciler.pendingUnmounts()).toEqual([]);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
  });

  test('an unmount attempt cut short by a plugin crash-restart (UNAVAILABLE) is retried at once when the plugin is healthy again, not after its backoff', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.vm.failNext('unpublish', {
      error: new CSIError({
        grpcCode: GrpcStatus.UNAVAILABLE,
        method: 'NodeUnpublishVolume',
        endpoint: 'fake',
        details: 'connection refused',
      }),
    });
    const [outcome] = await node.reconciler.unmount('a1');
    expect((outcome!.error as Error).message).toMatch(/UNAVAILABLE/);
    // The crash is seen (the plugin unhealthy), then the plugin is back well before the 1s backoff ends.
    node.csi.crash(PLUGIN);
    await node.clock.advance(100);
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.calls().slice(2)).toEqual(['unpublish vol1 a1', 'unpublish vol1 a1', 'unstage vol1']);
    expect(node.reconciler.pendingUnmounts()).toEqual([]);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
  });

  test('postrun: the wait ends when the agent goes away (its signal), the unmount left pending for the next agent', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.csi.bringDown(PLUGIN);
    const ac = new AbortController();
    const unmounting = track(node.reconciler.unmount('a1', undefined, { signal: ac.signal }));
    await node.settle();
    const reason = new ShutdownError('the agent is shutting down');
    ac.abort(reason);
    await node.settle();
    expect(unmounting.value).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN, error: reason }]);
    expect(node.record('a1')).toMatchObject({ desired: 'unmounted', claimed: true, staged: true, published: true });
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1']);
  });

  test('the stale-mount policy is kept in the record (absent: remount), and a restore asking for another one updates it', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2', { onStaleMount: 'keep' }), PRERUN);
    expect(node.record('a1')!.onStaleMount).toBeUndefined();
    expect(node.record('a2')!.onStaleMount).toBe('keep');
    const agent = node.restart();
    await agent.mount(req('a2', { onStaleMount: 'restart' }), RESTORE);
    expect(node.record('a2')!.onStaleMount).toBe('restart');
  });

  test('a restore whose changed policy cannot be written still restores the live mount, with the new policy in memory', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const agent = node.restart();
    node.store.failWrites = 1;
    expect(await agent.mount(req('a1', { onStaleMount: 'keep' }), RESTORE)).toMatchObject({ restored: true });
    expect(node.record('a1')!.onStaleMount).toBeUndefined();
    expect(agent.list('a1')[0]!.onStaleMount).toBe('keep');
    expect(node.logger.find('could not record a changed stale-mount policy; it holds until the agent restarts', 'warn')).toHaveLength(1);
  });
});

describe('shared staging', () => {
  test('two allocs with the same usage share one stage; the first unmount does not unstage, the last does', async () => {
    node = new TestNode();
    const { reconciler } = node;
    await reconciler.mount(req('a1'), PRERUN);
    await reconciler.mount(req('a2'), PRERUN);
    expect(node.changes()).toEqual([staged(), published('a1'), published('a2')]);
    await reconciler.unmount('a1');
    expect(node.calls().slice(4)).toEqual(['unpublish vol1 a1']);
    expect(node.mounted()).toEqual([targetOf('a2'), stagingOf()].sort());
    expect(node.claimer.releases).toEqual(['vol1 a1']);
    await reconciler.unmount('a2');
    expect(node.calls().slice(5)).toEqual(['unpublish vol1 a2', 'unstage vol1']);
    expect(node.changes().slice(3)).toEqual([unpublished('a1'), unpublished('a2'), unstaged()]);
    expect(node.mounted()).toEqual([]);
    expect(node.store.list().records).toEqual([]);
  });

  test('different usages (read-only, read-write) stage separately and unstage separately', async () => {
    node = new TestNode();
    const { reconciler } = node;
    await reconciler.mount(req('a1', { usage: RW }), PRERUN);
    await reconciler.mount(req('a2', { usage: RO }), PRERUN);
    expect(node.changes()).toEqual([staged(RW), published('a1', RW), staged(RO), published('a2', RO)]);
    await reconciler.unmount('a1');
    expect(node.changes().slice(4)).toEqual([unpublished('a1', RW), unstaged(RW)]);
    expect(node.mounted()).toEqual([targetOf('a2', RO), stagingOf(RO)].sort());
    await reconciler.unmount('a2');
    expect(node.changes().slice(6)).toEqual([unpublished('a2', RO), unstaged(RO)]);
    expect(node.mounted()).toEqual([]);
  });

  test('usages that differ only in mount options share the staging path', async () => {
    node = new TestNode();
    const { reconciler } = node;
    const ext4 = { ...RW, mountOptions: { fsType: 'ext4' } };
    const noatime = { ...RW, mountOptions: { mountFlags: ['noatime'] } };
    const one = await reconciler.mount(req('a1', { usage: ext4 }), PRERUN);
    const two = await reconciler.mount(req('a2', { usage: noatime }), PRERUN);
    expect(one.stagingPath).toBe(stagingOf());
    expect(two.stagingPath).toBe(stagingOf());
    expect(node.changes()).toEqual([staged(), published('a1'), published('a2')]);
    await reconciler.unmount('a1');
    expect(node.mounted()).toContain(stagingOf());
    await reconciler.unmount('a2');
    expect(node.changes().slice(3)).toEqual([unpublished('a1'), unpublished('a2'), unstaged()]);
  });

  test('after a restart only the last user unstages (nomad#25813)', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    const agent = node.restart();
    // a1 stopped while the agent was down: its postrun unmounts without a restore first.
    await agent.unmount('a1');
    expect(node.mounted()).toEqual([targetOf('a2'), stagingOf()].sort());
    expect((await agent.mount(req('a2'), RESTORE)).restored).toBe(true);
    await agent.unmount('a2');
    expect(node.calls().slice(4)).toEqual(['unpublish vol1 a1', 'unpublish vol1 a2', 'unstage vol1']);
    expect(node.mounted()).toEqual([]);
  });

  test('alloc A unmounts while alloc B has staged but not yet published: nothing is unstaged', async () => {
    node = new TestNode();
    const { reconciler } = node;
    await reconciler.mount(req('a1'), PRERUN);
    const publish = node.vm.hangNext('publish');
    const b = track(reconciler.mount(req('a2'), PRERUN));
    await publish.reached;
    expect(node.record('a2')).toMatchObject({ staged: true, published: true });
    const a = track(reconciler.unmount('a1'));
    await node.settle();
    publish.release();
    await b.promise;
    expect(await a.promise).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN }]);
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1', 'stage vol1', 'publish vol1 a2', 'unpublish vol1 a1']);
    expect(node.mounted()).toEqual([targetOf('a2'), stagingOf()].sort());
  });

  test('... and when B then gives up (aborted mid-publish), B is the last user and its undoing unstages', async () => {
    node = new TestNode();
    const { reconciler } = node;
    await reconciler.mount(req('a1'), PRERUN);
    const publish = node.vm.hangNext('publish');
    const ac = new AbortController();
    const b = track(reconciler.mount(req('a2'), { phase: 'prerun', signal: ac.signal }));
    await publish.reached;
    const a = track(reconciler.unmount('a1'));
    await node.settle();
    ac.abort(new Error('alloc a2 was stopped'));
    await node.settle();
    expect((b.error as Error).message).toBe('volume "data" (vol1) on plugin hostpath: alloc a2 was stopped');
    expect(a.settled).toBe(true);
    expect(node.calls().slice(4)).toEqual(['unpublish vol1 a1', 'unpublish vol1 a2', 'unstage vol1']);
    expect(node.mounted()).toEqual([]);
    expect(node.store.list().records).toEqual([]);
    expect(node.claimer.releases.sort()).toEqual(['vol1 a1', 'vol1 a2']);
  });

  test('... and when the agent died with B staged but not published: A unstages nothing, B restores onto the staging mount', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const hang = node.vm.hangNext('stage', { after: true });
    void node.reconciler.mount(req('a2'), PRERUN);
    await hang.reached;
    expect(node.record('a2')).toMatchObject({ staged: true, published: false });
    const agent = node.restart();
    await agent.unmount('a1');
    expect(node.mounted()).toEqual([stagingOf()]);
    const changes = node.changes().length;
    await agent.mount(req('a2'), RESTORE);
    expect(node.changes().slice(changes)).toEqual([published('a2')]);
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1', 'stage vol1', 'unpublish vol1 a1', 'stage vol1', 'publish vol1 a2']);
    expect(node.mounted()).toEqual([targetOf('a2'), stagingOf()].sort());
  });
});

describe('claims refused for now', () => {
  test("are asked again with the policy's claimBackoff until one is granted", async () => {
    node = new TestNode();
    node.claimer.refuseNext = 2;
    const retries: MountRetry[] = [];
    const mounting = track(node.reconciler.mount(req('a1'), { ...PRERUN, onRetry: (r) => retries.push(r) }));
    await node.settle();
    expect(node.claimer.claims).toHaveLength(1);
    await node.clock.advance(999);
    expect(node.claimer.claims).toHaveLength(1);
    await node.clock.advance(1);
    expect(node.claimer.claims).toHaveLength(2);
    await node.clock.advance(1_999);
    expect(node.claimer.claims).toHaveLength(2);
    await node.clock.advance(1);
    const info = await mounting.promise;
    expect(info.restored).toBe(false);
    expect(node.claimer.claims).toHaveLength(3);
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1']);
    expect(node.claimer.releases).toEqual([]);
    expect(node.logger.find('volume claim refused for now; retrying', 'info').map((r) => r.fields.delay_ms)).toEqual([1_000, 2_000]);
    // Whoever waits for the mount hears of each retry, with why and how long until the next try.
    expect(retries).toEqual([
      {
        name: 'data',
        volumeId: 'vol1',
        pluginId: 'hostpath',
        reason: 'claim',
        attempt: 1,
        error: 'volume vol1 has no free write claim',
        delayMs: 1_000,
      },
      {
        name: 'data',
        volumeId: 'vol1',
        pluginId: 'hostpath',
        reason: 'claim',
        attempt: 2,
        error: 'volume vol1 has no free write claim',
        delayMs: 2_000,
      },
    ]);
  });

  test('are given up once the next try would pass claimRetryLimit, with a message naming the limit', async () => {
    node = new TestNode({ timeouts: { claimRetryLimit: 2_500 } });
    node.claimer.refuseNext = 100;
    const mounting = track(node.reconciler.mount(req('a1'), PRERUN));
    await node.settle();
    await node.clock.advance(1_000);
    await node.settle();
    expect(mounting.error).toBeInstanceOf(VolumeMountError);
    expect((mounting.error as Error).message).toBe(
      'volume "data" (vol1) on plugin hostpath: claim not granted within 2s500ms (2 attempts): volume vol1 has no free write claim',
    );
    expect(node.claimer.claims).toHaveLength(2);
    // The claim was asked for, so it is released; nothing else was done.
    expect(node.claimer.releases).toEqual(['vol1 a1']);
    expect(node.calls()).toEqual([]);
    expect(node.store.list().records).toEqual([]);
  });
});

describe('a store that refuses writes', () => {
  test('refusing the first write of a mount: the mount fails clearly, nothing is claimed, what was stored is kept', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const before = node.store.snapshot();
    node.store.failWrites = 1;
    const err = await node.reconciler.mount(req('a2'), PRERUN).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeMountError);
    // The record was never written, so the plugin is not known yet; the volume and the store's reason are.
    expect((err as Error).message).toBe('volume "data" (vol1): fake mount store: write refused (put a2/data)');
    expect(node.store.snapshot()).toEqual(before);
    expect(node.reconciler.list().map((r) => r.allocId)).toEqual(['a1']);
    expect(node.claimer.claims.map((c) => c.allocId)).toEqual(['a1']);
    expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
  });

  test('refusing a write midway: the mount fails clearly and what it did is undone', async () => {
    node = new TestNode();
    const stage = node.vm.hangNext('stage', { after: true });
    const mounting = node.reconciler.mount(req('a1'), PRERUN);
    await stage.reached;
    // The next write is "published", before the publish goes out.
    node.store.failWrites = 1;
    stage.release();
    await expect(mounting).rejects.toThrow('volume "data" (vol1) on plugin hostpath: fake mount store: write refused (put a1/data)');
    expect(node.calls()).toEqual(['stage vol1', 'unstage vol1']);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
    expect(node.mounted()).toEqual([]);
    expect(node.store.list().records).toEqual([]);
  });

  test('refusing the write that would start undoing a failed mount: the mount still fails as a VolumeMountError, and a later unmount undoes it', async () => {
    node = new TestNode();
    const stage = node.vm.hangNext('stage', { after: true });
    const mounting = node.reconciler.mount(req('a1'), PRERUN);
    await stage.reached;
    node.store.failWrites = 2;
    stage.release();
    const err = await mounting.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeMountError);
    expect((err as Error).message).toBe('volume "data" (vol1) on plugin hostpath: fake mount store: write refused (put a1/data)');
    // Nothing the node holds is forgotten: the record still says claimed and staged.
    expect(node.record('a1')).toMatchObject({ claimed: true, staged: true, published: false });
    expect(node.logger.find('could not record that a failed mount is to be undone', 'error')).toHaveLength(1);
    await node.reconciler.unmount('a1');
    expect(node.calls()).toEqual(['stage vol1', 'unstage vol1']);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
    expect(node.mounted()).toEqual([]);
    expect(node.store.list().records).toEqual([]);
  });

  test('refusing the first write of an unmount: the unmount fails clearly and changes nothing', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const before = node.store.snapshot();
    node.store.failWrites = 1;
    const [outcome] = await node.reconciler.unmount('a1');
    expect((outcome!.error as Error).message).toBe('fake mount store: write refused (put a1/data)');
    // Nothing written, nothing unmounted yet; wanted unmounted in memory, and retried.
    expect(node.store.snapshot()).toEqual(before);
    expect(node.reconciler.mounted('a1')).toHaveLength(0);
    expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
    await node.clock.advance(node.timeouts.unmountBackoff(1));
    await node.settle();
    expect(node.mounted()).toEqual([]);
    expect(node.store.list().records).toEqual([]);
  });

  test('refusing writes while an unmount is retried: the retries go on until it is done', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.vm.failNext('unpublish', { times: 2 });
    const [outcome] = await node.reconciler.unmount('a1');
    expect(outcome!.error).toBeDefined();
    // The second attempt fails too, and so does the write that would count it.
    node.store.failWrites = 1;
    await node.clock.advance(1_000);
    expect(node.calls().filter((c) => c.startsWith('unpublish'))).toHaveLength(2);
    expect(node.logger.find('could not record a failed unmount attempt in the state; retrying anyway', 'error')).toHaveLength(1);
    await node.clock.advance(8_000);
    expect(node.calls().filter((c) => c.startsWith('unpublish'))).toHaveLength(3);
    expect(node.reconciler.pendingUnmounts()).toEqual([]);
    expect(node.store.list().records).toEqual([]);
    expect(node.mounted()).toEqual([]);
  });
});

// Each of these failed against the reconciler before the fix it is named for.
describe('review fixes', () => {
  test('mounted again while its unmount waits on the release: the claim waits for the release, so the record keeps its claim and a later unmount releases it', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const release = node.claimer.hangNext('release');
    const unmounting = track(node.reconciler.unmount('a1'));
    await release.reached;
    const mounting = track(node.reconciler.mount(req('a1'), PRERUN));
    await node.settle();
    // The claim has not crossed the release under way.
    expect(node.claimer.claims).toHaveLength(1);
    release.release();
    await node.settle();
    await unmounting.promise;
    await mounting.promise;
    expect(node.claimer.claims).toHaveLength(2);
    expect(node.record('a1')).toMatchObject({ desired: 'mounted', claimed: true, published: true });
    await node.reconciler.unmount('a1');
    expect(node.claimer.releases).toEqual(['vol1 a1', 'vol1 a1']);
    expect(node.store.list().records).toEqual([]);
  });

  test('a restore of a live alloc that already uses one volume under two names (an older agent allowed it) is not refused', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    // Written as an older agent would have: the same volume under a second name, mounted.
    node.store.put({ ...node.record('a1')!, name: 'again' });
    const agent = node.restart();
    const infos = await Promise.all([agent.mount(req('a1'), RESTORE), agent.mount(req('a1', { name: 'again' }), RESTORE)]);
    expect(infos.map((i) => i.restored)).toEqual([true, true]);
    expect(node.claimer.releases).toEqual([]);
  });

  test('a mount failing with a ShutdownError from the plugin (not the agent going away) is still undone', async () => {
    node = new TestNode();
    node.vm.failNext('publish', { error: new ShutdownError('CSI client for plugin hostpath is disposed') });
    await expect(node.reconciler.mount(req('a1'), PRERUN)).rejects.toBeInstanceOf(VolumeMountError);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
    expect(node.store.list().records).toEqual([]);
  });

  test('after a restart, a record whose target is gone and whose first claim is refused for now: the retry reads the mount table again and stages and publishes', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const calls = node.calls().length;
    const agent = node.restart();
    // A host reboot while the agent was down.
    node.mounts.unmark(targetOf('a1'));
    node.mounts.unmark(stagingOf());
    node.claimer.refuseNext = 1;
    const mounting = track(agent.mount(req('a1'), RESTORE));
    await node.settle();
    expect(mounting.settled).toBe(false);
    expect(node.claimer.claims).toHaveLength(2);
    await node.clock.advance(1_000);
    const info = await mounting.promise;
    expect(info).toEqual({
      name: 'data',
      volumeId: 'vol1',
      pluginId: PLUGIN,
      targetPath: targetOf('a1'),
      stagingPath: stagingOf(),
      readOnly: false,
      restored: false,
      pluginAway: false,
    });
    expect(node.claimer.claims).toHaveLength(3);
    expect(node.calls().slice(calls)).toEqual(['stage vol1', 'publish vol1 a1']);
    expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
    // Checked on each try, never taken as mounted from the first check.
    expect(node.logger.find('volume mount gone after restore; mounting again', 'warn')).toHaveLength(2);
    expect(node.logger.find('volume still mounted after restore')).toEqual([]);
  });

  test.each([
    ['the unpublish has unmounted and not answered yet', { after: true }],
    ['the unpublish has not unmounted yet', { after: false }],
  ] as const)(
    'mounted again while its unmount is under way (%s): the unmount stops after that step, and the mount ends mounted',
    async (_, hangOptions) => {
      node = new TestNode();
      await node.reconciler.mount(req('a1'), PRERUN);
      const unpublish = node.vm.hangNext('unpublish', hangOptions);
      const unmounting = track(node.reconciler.unmount('a1'));
      await unpublish.reached;
      const mounting = track(node.reconciler.mount(req('a1'), PRERUN));
      await node.settle();
      unpublish.release();
      await node.settle();

      expect(await unmounting.promise).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN }]);
      const info = await mounting.promise;
      expect(info).toEqual({
        name: 'data',
        volumeId: 'vol1',
        pluginId: PLUGIN,
        targetPath: targetOf('a1'),
        stagingPath: stagingOf(),
        readOnly: false,
        restored: false,
        pluginAway: false,
      });
      // No unstage, no release, no forgetting: the mount took over from the unpublish.
      expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1', 'unpublish vol1 a1', 'stage vol1', 'publish vol1 a1']);
      expect(node.changes()).toEqual([staged(), published('a1'), unpublished('a1'), published('a1')]);
      expect(node.claimer.releases).toEqual([]);
      expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
      expect(node.record('a1')).toMatchObject({
        desired: 'mounted',
        claimed: true,
        staged: true,
        published: true,
        targetPath: targetOf('a1'),
        stagingPath: stagingOf(),
      });
      expect(node.reconciler.mounted('a1')).toEqual([info]);
      expect(node.reconciler.pendingUnmounts()).toEqual([]);
    },
  );

  test('the same volume under a second name in one alloc is refused, naming the first, and the first mount is left alone', async () => {
    node = new TestNode();
    const first = await node.reconciler.mount(req('a1'), PRERUN);
    const before = node.store.snapshot();
    const writes = node.store.writes.length;
    const err = await node.reconciler.mount(req('a1', { name: 'again' }), PRERUN).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeMountError);
    expect((err as VolumeMountError).cause).toBeInstanceOf(ClaimError);
    expect((err as Error).message).toBe(
      'volume "again" (vol1): alloc a1 already uses volume "vol1" as "data"; a group may use a volume once (mount that one volume into several tasks instead)',
    );
    expect(node.store.snapshot()).toEqual(before);
    expect(node.store.writes).toHaveLength(writes);
    expect(node.calls()).toEqual(['stage vol1', 'publish vol1 a1']);
    expect(node.claimer.claims).toHaveLength(1);
    expect(node.claimer.releases).toEqual([]);
    expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
    expect(node.reconciler.mounted('a1')).toEqual([first]);
  });

  test('... and when both names are asked at once, the one asked second is refused and the first mounts', async () => {
    node = new TestNode();
    const [one, two] = await Promise.allSettled([
      node.reconciler.mount(req('a1'), PRERUN),
      node.reconciler.mount(req('a1', { name: 'again' }), PRERUN),
    ]);
    expect(one).toMatchObject({ status: 'fulfilled', value: { name: 'data', targetPath: targetOf('a1') } });
    expect(two).toMatchObject({
      status: 'rejected',
      reason: {
        message:
          'volume "again" (vol1): alloc a1 already uses volume "vol1" as "data"; a group may use a volume once (mount that one volume into several tasks instead)',
      },
    });
    expect(node.reconciler.list().map((r) => r.name)).toEqual(['data']);
    expect(node.claimer.claims).toHaveLength(1);
    expect(node.claimer.releases).toEqual([]);
  });

  test.each([
    [
      'a hanging stage',
      (n: TestNode) => n.vm.hangNext('stage').reached,
      { claimed: true, staged: true, published: false },
      [staged(), published('a1')],
    ],
    [
      'a hanging publish',
      (n: TestNode) => n.vm.hangNext('publish').reached,
      { claimed: true, staged: true, published: true },
      [published('a1')],
    ],
  ] as const)(
    'a mount aborted during %s because the agent is detaching (a ShutdownError) keeps its record and undoes nothing; the next agent finishes it on restore',
    async (_, hold, flags, restoreChanges) => {
      node = new TestNode();
      const reached = hold(node);
      const ac = new AbortController();
      const mounting = node.reconciler.mount(req('a1'), { phase: 'prerun', signal: ac.signal });
      await reached;
      const reason = new ShutdownError('the agent is detaching');
      ac.abort(reason);
      const err = await mounting.catch((e: unknown) => e);
      await node.settle();
      expect(err).toBeInstanceOf(VolumeMountError);
      expect((err as Error).cause).toBe(reason);
      const calls = node.calls();
      expect(calls.some((c) => c.startsWith('unpublish') || c.startsWith('unstage'))).toBe(false);
      expect(node.claimer.releases).toEqual([]);
      expect(node.record('a1')).toMatchObject({ desired: 'mounted', attempts: 0, ...flags });
      expect(node.record('a1')!.lastError).toBeUndefined();
      expect(node.reconciler.pendingUnmounts()).toEqual([]);

      const changes = node.changes().length;
      const agent = node.restart();
      await node.settle();
      expect(node.calls()).toEqual(calls);
      const info = await agent.mount(req('a1'), RESTORE);
      expect(info).toEqual({
        name: 'data',
        volumeId: 'vol1',
        pluginId: PLUGIN,
        targetPath: targetOf('a1'),
        stagingPath: stagingOf(),
        readOnly: false,
        restored: false,
        pluginAway: false,
      });
      expect(node.changes().slice(changes)).toEqual(restoreChanges);
      expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
      expect(node.record('a1')).toMatchObject({
        desired: 'mounted',
        claimed: true,
        staged: true,
        published: true,
        targetPath: targetOf('a1'),
      });
      expect(node.claimer.releases).toEqual([]);
    },
  );

  test('an unmount whose store refuses the write of one of two records: both are attempted, the refused one reports the error, and after the backoff both are gone', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a1', { name: 'logs', volumeId: 'vol2', usage: RO }), PRERUN);
    node.store.failWrites = 1;
    const outcomes = await node.reconciler.unmount('a1');
    expect(outcomes).toEqual([
      {
        name: 'data',
        volumeId: 'vol1',
        pluginId: PLUGIN,
        error: expect.objectContaining({ message: 'fake mount store: write refused (put a1/data)' }),
      },
      { name: 'logs', volumeId: 'vol2', pluginId: PLUGIN },
    ]);
    // logs came down at once; data waits for its retry, still mounted.
    expect(node.record('a1', 'logs')).toBeUndefined();
    expect(node.mounted()).toEqual([targetOf('a1'), stagingOf()].sort());
    expect(node.reconciler.pendingUnmounts().map((r) => r.name)).toEqual(['data']);
    expect(node.reconciler.mounted('a1')).toEqual([]);

    await node.clock.advance(node.timeouts.unmountBackoff(1));
    await node.settle();
    expect(node.store.list()).toEqual({ records: [], failures: [] });
    expect(node.reconciler.list()).toEqual([]);
    expect(node.mounted()).toEqual([]);
    expect(node.claimer.releases.sort()).toEqual(['vol1 a1', 'vol2 a1']);
  });

  test('two unmounts of an alloc at once join one attempt: each step is asked once, and both report how it went', async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    const unpublish = node.vm.hangNext('unpublish');
    const one = node.reconciler.unmount('a1');
    await unpublish.reached;
    const two = node.reconciler.unmount('a1');
    await node.settle();
    // The plugin goes away under the hanging call, so the attempt fails (and a second one would be seen).
    node.csi.bringDown(PLUGIN);
    unpublish.release();
    const [first, second] = await Promise.all([one, two]);
    expect(first).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN, error: expect.any(PluginInstanceNotFoundError) }]);
    expect(second).toEqual(first);
    expect(node.calls().slice(2)).toEqual(['unpublish vol1 a1']);
    expect(node.record('a1')).toMatchObject({ desired: 'unmounted', published: true, attempts: 1 });

    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.calls().slice(2)).toEqual(['unpublish vol1 a1', 'unpublish vol1 a1', 'unstage vol1']);
    expect(node.claimer.releases).toEqual(['vol1 a1']);
    expect(node.store.list().records).toEqual([]);
    expect(node.mounted()).toEqual([]);
  });

  test("a retry timer firing while an unmount attempt is under way joins it: the record's steps are asked once", async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    await node.reconciler.mount(req('a2'), PRERUN);
    // a2's unmount fails: a retry of the volume's unmounts is due in 1s.
    node.vm.failNext('unpublish');
    const [failed] = await node.reconciler.unmount('a2');
    expect(failed!.error).toBeDefined();
    const unpublish = node.vm.hangNext('unpublish');
    const one = track(node.reconciler.unmount('a1'));
    await unpublish.reached;
    // The timer fires with a1's attempt hanging: it retries a2 and joins a1.
    await node.clock.advance(1_000);
    node.csi.bringDown(PLUGIN);
    unpublish.release();
    await node.settle();
    expect(one.settled).toBe(true);
    expect(one.value).toEqual([{ name: 'data', volumeId: 'vol1', pluginId: PLUGIN, error: expect.any(PluginInstanceNotFoundError) }]);
    expect(node.calls().filter((c) => c === 'unpublish vol1 a1')).toHaveLength(1);
    expect(node.record('a1')).toMatchObject({ desired: 'unmounted', published: true, attempts: 1 });

    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.calls().filter((c) => c === 'unpublish vol1 a1')).toHaveLength(2);
    expect(node.store.list().records).toEqual([]);
    expect(node.mounted()).toEqual([]);
    expect(node.claimer.releases.sort()).toEqual(['vol1 a1', 'vol1 a2']);
  });
});

describe('limits and dispose (L1, L2)', () => {
  test('the first plugin wait of a mount is held to the phase deadline overall: time spent looking the volume up counts', async () => {
    node = new TestNode({ pluginUp: false });
    const lookup = node.claimer.lookup.bind(node.claimer);
    node.claimer.lookup = async (id: string) => {
      await node.clock.sleep(50_000);
      return lookup(id);
    };
    const limit = node.timeouts.pluginWait('prerun');
    const r = track(node.reconciler.mount(req('a1'), PRERUN));
    await node.clock.advance(50_000);
    await node.settle();
    await node.clock.advance(limit - 50_000);
    await node.settle();
    expect(r.settled).toBe(true);
    expect(r.error).toBeInstanceOf(VolumeMountError);
  });

  test("dispose() ends an unmount's wait for its plugin: no CSI step after the reconciler is disposed", async () => {
    node = new TestNode();
    await node.reconciler.mount(req('a1'), PRERUN);
    node.csi.crash(PLUGIN);
    const u = track(node.reconciler.unmount('a1'));
    await node.settle();
    const calls = node.calls();
    node.reconciler.dispose();
    await node.settle();
    expect(u.settled).toBe(true);
    node.csi.bringUp(PLUGIN);
    await node.settle();
    expect(node.calls()).toEqual(calls);
    expect(node.record('a1')).toMatchObject({ desired: 'unmounted', published: true });
  });
});

describe('node-side expansion and usage', () => {
  test('online: NodeExpandVolume for every live mount of the volume, nothing owed after; offline: owed, and made after the next publish', async () => {
    node = new TestNode();
    const { reconciler, vm } = node;
    vm.nodeExpand = true;
    await reconciler.mount(req('a1'), PRERUN);
    expect(await reconciler.expandMounted('vol1', 5000, { online: true })).toEqual([{ allocId: 'a1', name: 'data', capacityBytes: 5000 }]);
    expect(vm.expansions).toEqual(['vol1 a1 5000']);
    expect(node.record('a1')!.expandTo).toBeUndefined();
    expect(await reconciler.expandMounted('other-volume', 5000, { online: true })).toEqual([]);

    expect(await reconciler.expandMounted('vol1', 8000, { online: false })).toEqual([{ allocId: 'a1', name: 'data', deferred: true }]);
    expect(node.record('a1')!.expandTo).toBe(8000);
    expect(vm.expansions).toEqual(['vol1 a1 5000']);
    // The agent restarts and finds the mount gone: its next publish makes the owed expansion.
    node.mounts.points.delete(targetOf('a1'));
    const restarted = node.restart();
    await restarted.mount(req('a1'), RESTORE);
    expect(vm.expansions).toEqual(['vol1 a1 5000', 'vol1 a1 8000']);
    expect(node.record('a1')!.expandTo).toBeUndefined();
  });

  test('usage: NodeGetVolumeStats of each live mount; a plugin without stats says so', async () => {
    node = new TestNode();
    const { reconciler, vm } = node;
    await reconciler.mount(req('a1'), PRERUN);
    expect(await reconciler.usage({ allocId: 'a1' })).toEqual([
      {
        allocId: 'a1',
        name: 'data',
        volumeId: 'vol1',
        pluginId: PLUGIN,
        targetPath: targetOf('a1'),
        error: `plugin "${PLUGIN}" does not report volume stats (no GET_VOLUME_STATS)`,
      },
    ]);
    vm.volumeStats = true;
    expect(await reconciler.usage({ volumeId: 'vol1' })).toEqual([
      {
        allocId: 'a1',
        name: 'data',
        volumeId: 'vol1',
        pluginId: PLUGIN,
        targetPath: targetOf('a1'),
        usage: { bytes: { total: 1000, used: 10, available: 990 } },
      },
    ]);
    expect(await reconciler.usage({ volumeId: 'nope' })).toEqual([]);
  });
});
