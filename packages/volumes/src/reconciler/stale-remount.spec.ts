// remountStale (stale-remount.ts) against a host of its own: records in a
// map, every write the host is asked for logged in order with the node
// plugin's calls, so each test reads as the remount's order — the intent
// (`remounting`) written to every record first, then unpublish, unstage of a
// stale staging mount (taking its other users along, or held by an unmount),
// then stage and publish again — and as what is reported: the keys mounted
// again, those that failed and why (a refusal, a target in use, a staging
// mount not staged again), and the records taken along.
import { DefaultTimeoutPolicy } from '@csiplug/core';
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import { KeyedMutex } from '@csiplug/csimanager';
import { FakeCSIManager, FakeMountTable } from '@csiplug/csimanager/testing';
import { PLUGIN, RO, RW, TIMEOUTS, stagingOf, targetOf, track } from '../../test/support/reconciler-node';
import { ClaimError, type ClaimableVolume } from '../catalog/volume-claimer';
import { FakeClaimer } from '../testing/fake-claimer';
import { ReconcilerStoppedError, RemountBusyError } from './errors';
import { mountKey, stagingKey, type VolumeMountRecord } from './mount-record';
import type { MountedVolumeInfo } from './reconciler-service';
import { volumeRef } from './record-views';
import { remountStale, type RemountHost } from './stale-remount';

/** A record of alloc `allocId` with volume vol1 mounted (staged, published), unless `over` says otherwise. */
function rec(allocId: string, over: Partial<VolumeMountRecord> = {}): VolumeMountRecord {
  return {
    allocId,
    name: 'data',
    volumeId: 'vol1',
    externalId: 'ext-vol1',
    pluginId: PLUGIN,
    usage: RW,
    desired: 'mounted',
    claimed: true,
    staged: true,
    published: true,
    targetPath: targetOf(allocId),
    stagingPath: stagingOf(),
    attempts: 0,
    since: 0,
    ...over,
  };
}

const key = (allocId: string) => mountKey(allocId, 'data');
const STAGING = stagingKey(rec('a1'));

class Host implements RemountHost {
  readonly clock = new FakeClock(0);
  readonly mounts = new FakeMountTable();
  readonly csi = new FakeCSIManager({ clock: this.clock, timeouts: new DefaultTimeoutPolicy(TIMEOUTS), mounts: this.mounts });
  readonly claimer = new FakeClaimer();
  readonly records = new Map<string, VolumeMountRecord>();
  readonly volumes = new Map<string, ClaimableVolume>();
  readonly downs = new Map<string, unknown>();
  readonly queue = new KeyedMutex();
  /** Node plugin calls, the host's writes and reports, in order. */
  readonly events: string[] = [];
  isStopped = false;
  failWrites = 0;

  constructor(...records: VolumeMountRecord[]) {
    for (const r of records) this.records.set(key(r.allocId), r);
    this.claimer.volumes.set('vol1', { id: 'vol1', externalId: 'ext-vol1', pluginId: PLUGIN, secrets: { token: 's' } });
    this.csi.bringUp(PLUGIN);
    const vm = this.vm;
    for (const step of ['unpublishVolume', 'unstageVolume', 'stageVolume', 'publishVolume'] as const) {
      const call = vm[step].bind(vm) as (...args: unknown[]) => Promise<unknown>;
      vm[step] = ((...args: unknown[]) => {
        const alloc = step === 'unpublishVolume' || step === 'publishVolume' ? ` ${String(args[1])}` : '';
        this.events.push(`${step.replace('Volume', '')} ${(args[0] as { id: string }).id}${alloc}`);
        return call(...args);
      }) as never;
    }
  }

  get vm() {
    return this.csi.managers.get(PLUGIN)!;
  }

  stopped(): boolean {
    return this.isStopped;
  }

  update(k: string, change: Partial<VolumeMountRecord>): VolumeMountRecord {
    this.events.push(`write ${k} ${JSON.stringify(change)}`);
    if (this.failWrites > 0) {
      this.failWrites--;
      throw new Error('store refused the write');
    }
    const next = { ...this.records.get(k)!, ...change };
    for (const f of Object.keys(change) as (keyof VolumeMountRecord)[]) if (change[f] === undefined) delete next[f];
    this.records.set(k, next);
    return next;
  }

  async nodeSteps(k: string): Promise<MountedVolumeInfo> {
    const r = this.records.get(k)!;
    const vm = this.csi.volumeManager(r.pluginId);
    const volume = volumeRef(r, this.volumes.get(k));
    if (!r.staged) {
      this.update(k, { staged: true });
      await vm.stageVolume(volume, r.usage);
      this.update(k, { stagingPath: stagingOf(r.usage) });
    }
    this.update(k, { published: true });
    const info = await vm.publishVolume(volume, r.allocId, r.usage);
    this.update(k, { targetPath: info.targetPath });
    return {
      name: r.name,
      volumeId: r.volumeId,
      pluginId: r.pluginId,
      targetPath: info.targetPath,
      readOnly: false,
      restored: false,
      pluginAway: false,
    };
  }

  remountReported(k: string): void {
    this.events.push(`reported ${k}`);
    this.update(k, { remounting: undefined });
  }
}

const remountWrites = (k: string) => [
  'unpublish vol1 ' + k.split('/')[0],
  `write ${k} {"published":false}`,
  `write ${k} {"published":true}`,
  'publish vol1 ' + k.split('/')[0],
  `write ${k} {"targetPath":${JSON.stringify(targetOf(k.split('/')[0]!))}}`,
];

describe('remountStale', () => {
  test('writes the intent first, then unpublishes and publishes again at the same target, keeping the intent until reported', async () => {
    const host = new Host(rec('a1'));
    const outcome = await remountStale(host, 'vol1', [key('a1')], new Set());
    expect(outcome).toEqual({ done: new Set([key('a1')]), failed: new Map(), extra: new Map() });
    expect(host.events).toEqual([`write a1/data {"remounting":"remount"}`, ...remountWrites(key('a1'))]);
    expect(host.records.get(key('a1'))).toEqual({ ...rec('a1'), remounting: 'remount' });
    // The catalog's view of the volume (its secrets) is looked up for a restored record, and handed to the steps.
    expect(host.volumes.get(key('a1'))).toEqual({ id: 'vol1', externalId: 'ext-vol1', pluginId: PLUGIN, secrets: { token: 's' } });
    expect(host.vm.requests.map((r) => r.volume.secrets)).toEqual([{ token: 's' }, { token: 's' }]);
  });

  test('a volume already known is not looked up again', async () => {
    const host = new Host(rec('a1'));
    const known = { id: 'vol1', externalId: 'ext-vol1', pluginId: PLUGIN, secrets: { token: 'mine' } };
    host.volumes.set(key('a1'), known);
    host.claimer.volumes.clear();
    const outcome = await remountStale(host, 'vol1', [key('a1')], new Set());
    expect(outcome.done).toEqual(new Set([key('a1')]));
    expect(host.volumes.get(key('a1'))).toBe(known);
  });

  test('the intent is `restart` under on_stale_mount "restart" or an intent already "restart"; one already written is not written again', async () => {
    const host = new Host(
      rec('a1', { onStaleMount: 'restart' }),
      rec('a2', { remounting: 'restart' }),
      rec('a3', { remounting: 'remount', onStaleMount: 'restart' }),
      rec('a4', { remounting: 'remount' }),
      rec('a5', { onStaleMount: 'keep' }),
    );
    const keys = ['a1', 'a2', 'a3', 'a4', 'a5'].map(key);
    const outcome = await remountStale(host, 'vol1', keys, new Set());
    expect(outcome.done).toEqual(new Set(keys));
    expect(host.events.filter((e) => e.includes('remounting'))).toEqual([
      'write a1/data {"remounting":"restart"}',
      'write a3/data {"remounting":"restart"}',
      'write a5/data {"remounting":"remount"}',
    ]);
    // Every intent is written before the first unpublish.
    expect(host.events.findIndex((e) => e.startsWith('unpublish'))).toBe(3);
  });

  test('refused for now (a node not settled): every key fails with a retryable ClaimError saying why, nothing looked up or done', async () => {
    const host = new Host(rec('a1'), rec('a2'));
    host.claimer.remountRefused = 'node n1 joined 2s ago and is not settled';
    const outcome = await remountStale(host, 'vol1', [key('a1'), key('a2')], new Set());
    expect(outcome.done).toEqual(new Set());
    expect([...outcome.failed.keys()]).toEqual([key('a1'), key('a2')]);
    for (const err of outcome.failed.values()) {
      expect(err).toBeInstanceOf(ClaimError);
      expect(err).toMatchObject({ retryable: true, message: 'node n1 joined 2s ago and is not settled' });
    }
    expect(host.events).toEqual([]);
    expect(host.volumes.size).toBe(0);
  });

  test('a volume the catalog cannot look up fails its key, which is left as it is', async () => {
    const host = new Host(rec('a1'));
    host.claimer.volumes.clear();
    const outcome = await remountStale(host, 'vol1', [key('a1')], new Set());
    expect(outcome.done).toEqual(new Set());
    expect((outcome.failed.get(key('a1')) as Error).message).toMatch(/^volume "vol1" is not registered/);
    expect(host.events).toEqual([]);
  });

  test('a stopped reconciler rejects with a ReconcilerStoppedError, doing nothing', async () => {
    const host = new Host(rec('a1'));
    host.isStopped = true;
    await expect(remountStale(host, 'vol1', [key('a1')], new Set())).rejects.toBeInstanceOf(ReconcilerStoppedError);
    expect(host.events).toEqual([]);
  });

  test('runs under the volume queue', async () => {
    const host = new Host(rec('a1'));
    let free!: () => void;
    const busy = host.queue.run('vol1', () => new Promise<void>((r) => (free = r)));
    const remount = track(remountStale(host, 'vol1', [key('a1')], new Set()));
    await flushMicrotasks(50);
    expect(host.events).toEqual([]);
    free();
    await busy;
    await remount.promise;
    expect(host.events[0]).toBe('write a1/data {"remounting":"remount"}');
  });

  test('an intent the store refuses fails its key, which is left as it is; the others go on', async () => {
    const host = new Host(rec('a1'), rec('a2'));
    host.failWrites = 1;
    const outcome = await remountStale(host, 'vol1', [key('a1'), key('a2')], new Set());
    expect(outcome.done).toEqual(new Set([key('a2')]));
    expect(outcome.failed).toEqual(new Map([[key('a1'), new Error('store refused the write')]]));
    expect(host.events).toEqual([
      'write a1/data {"remounting":"remount"}',
      'write a2/data {"remounting":"remount"}',
      ...remountWrites(key('a2')),
    ]);
  });

  test('a record not published is only published again; one unmounted or being unmounted is left to its unmount', async () => {
    const host = new Host(rec('a1', { published: false }), rec('a2', { desired: 'unmounted' }), rec('a3'));
    host.downs.set(key('a3'), {});
    const outcome = await remountStale(host, 'vol1', [key('a1'), key('a2'), key('a3')], new Set());
    expect(outcome).toEqual({ done: new Set([key('a1')]), failed: new Map(), extra: new Map() });
    expect(host.events).toEqual([
      'write a1/data {"remounting":"remount"}',
      'write a1/data {"published":true}',
      'publish vol1 a1',
      `write a1/data {"targetPath":${JSON.stringify(targetOf('a1'))}}`,
    ]);
  });

  test('a target in use is left mounted: reported as a RemountBusyError naming it, its intent reported (cleared), never published again', async () => {
    const host = new Host(rec('a1'));
    const busy = new Error('umount: target is busy');
    host.vm.failNext('unpublish', { error: busy });
    const outcome = await remountStale(host, 'vol1', [key('a1')], new Set());
    expect(outcome.done).toEqual(new Set());
    const err = outcome.failed.get(key('a1'));
    expect(err).toBeInstanceOf(RemountBusyError);
    expect(err).toMatchObject({ code: 'EREMOUNT_BUSY', target: targetOf('a1'), cause: busy });
    expect(host.events).toEqual([
      'write a1/data {"remounting":"remount"}',
      'unpublish vol1 a1',
      'reported a1/data',
      // The intent cleared (a field set to undefined).
      'write a1/data {}',
    ]);
    expect(host.records.get(key('a1'))).toEqual(rec('a1'));
  });

  test('a target in use of a record that has lost its target path is named by its key', async () => {
    const host = new Host(rec('a1', { targetPath: undefined }));
    host.vm.failNext('unpublish', { error: new Error('EBUSY') });
    const outcome = await remountStale(host, 'vol1', [key('a1')], new Set());
    expect(outcome.failed.get(key('a1'))).toMatchObject({ target: key('a1') });
  });

  test('an unpublish that fails otherwise is reported as it is; the intent stays (for a next try)', async () => {
    const host = new Host(rec('a1'));
    host.vm.failNext('unpublish');
    const outcome = await remountStale(host, 'vol1', [key('a1')], new Set());
    expect(outcome.done).toEqual(new Set());
    expect(outcome.failed.get(key('a1'))).not.toBeInstanceOf(RemountBusyError);
    expect((outcome.failed.get(key('a1')) as Error).message).toMatch(/failed at NodeUnpublishVolume: injected failure$/);
    expect(host.events).toEqual(['write a1/data {"remounting":"remount"}', 'unpublish vol1 a1']);
    expect(host.records.get(key('a1'))).toEqual({ ...rec('a1'), remounting: 'remount' });
  });

  test('a failed publish is reported; one of a record unmounted meanwhile is not', async () => {
    const host = new Host(rec('a1'), rec('a2'));
    host.vm.failNext('publish', { times: 2 });
    const nodeSteps = host.nodeSteps.bind(host);
    host.nodeSteps = async (k) => {
      if (k === key('a2')) host.records.set(k, { ...host.records.get(k)!, desired: 'unmounted' });
      return nodeSteps(k);
    };
    const outcome = await remountStale(host, 'vol1', [key('a1'), key('a2')], new Set());
    expect(outcome.done).toEqual(new Set());
    expect([...outcome.failed.keys()]).toEqual([key('a1')]);
    expect((outcome.failed.get(key('a1')) as Error).message).toMatch(/failed at NodePublishVolume/);
  });

  describe('a stale staging mount (restage)', () => {
    test('is unstaged once, by the first key on it, after every unpublish; then each is staged and published again', async () => {
      const host = new Host(rec('a1'), rec('a2'));
      const outcome = await remountStale(host, 'vol1', [key('a1'), key('a2')], new Set([STAGING]));
      expect(outcome).toEqual({ done: new Set([key('a1'), key('a2')]), failed: new Map(), extra: new Map() });
      expect(host.events).toEqual([
        'write a1/data {"remounting":"remount"}',
        'write a2/data {"remounting":"remount"}',
        'unpublish vol1 a1',
        'write a1/data {"published":false}',
        'unpublish vol1 a2',
        'write a2/data {"published":false}',
        'unstage vol1',
        'write a1/data {"staged":false}',
        'write a2/data {"staged":false}',
        'write a1/data {"staged":true}',
        'stage vol1',
        `write a1/data {"stagingPath":${JSON.stringify(stagingOf())}}`,
        'write a1/data {"published":true}',
        'publish vol1 a1',
        `write a1/data {"targetPath":${JSON.stringify(targetOf('a1'))}}`,
        'write a2/data {"staged":true}',
        'stage vol1',
        `write a2/data {"stagingPath":${JSON.stringify(stagingOf())}}`,
        'write a2/data {"published":true}',
        'publish vol1 a2',
        `write a2/data {"targetPath":${JSON.stringify(targetOf('a2'))}}`,
      ]);
    });

    test('takes along the other records mounted from it, reported as they were; records of other staging mounts stay', async () => {
      const a2 = rec('a2', { onStaleMount: 'restart' });
      const host = new Host(rec('a1'), a2, rec('a3', { usage: RO, stagingPath: stagingOf(RO), targetPath: targetOf('a3', RO) }));
      host.records.set(mountKey('a4', 'data'), rec('a4', { staged: false }));
      const outcome = await remountStale(host, 'vol1', [key('a1')], new Set([STAGING]));
      expect(outcome.done).toEqual(new Set([key('a1'), key('a2')]));
      expect(outcome.failed).toEqual(new Map());
      expect(outcome.extra).toEqual(new Map([[key('a2'), a2]]));
      expect(outcome.extra!.get(key('a2'))).not.toBe(host.records.get(key('a2')));
      expect(host.events.filter((e) => !e.startsWith('write'))).toEqual([
        'unpublish vol1 a1',
        'unpublish vol1 a2',
        'unstage vol1',
        'stage vol1',
        'publish vol1 a1',
        'stage vol1',
        'publish vol1 a2',
      ]);
      expect(host.events).toContain('write a2/data {"remounting":"restart"}');
      expect(host.volumes.has(key('a2'))).toBe(true);
      expect(host.records.get(key('a3'))).toEqual(rec('a3', { usage: RO, stagingPath: stagingOf(RO), targetPath: targetOf('a3', RO) }));
    });

    test.each([
      ['wanted unmounted', (h: Host) => h.records.set(key('a3'), rec('a3', { desired: 'unmounted' }))],
      ['being unmounted', (h: Host) => (h.records.set(key('a3'), rec('a3')), h.downs.set(key('a3'), {}))],
    ])('held by a record %s: its keys are left as they are and reported failed, saying why', async (_, hold) => {
      const host = new Host(rec('a1'), rec('a2'));
      hold(host);
      const outcome = await remountStale(host, 'vol1', [key('a1'), key('a2')], new Set([STAGING]));
      expect(outcome.done).toEqual(new Set());
      expect(outcome.extra).toEqual(new Map());
      const why = `its staging mount ${stagingOf()} is stale and cannot be staged again now: the unmount of alloc a3 still holds it; tried again after a backoff`;
      expect(outcome.failed).toEqual(
        new Map([
          [key('a1'), new Error(why)],
          [key('a2'), new Error(why)],
        ]),
      );
      expect(host.events).toEqual([]);
    });

    test('held, for a key not staged on it: that key is remounted all the same', async () => {
      const host = new Host(rec('a1', { staged: false, stagingPath: undefined }), rec('a3', { desired: 'unmounted' }));
      host.vm.staging = false;
      const other = stagingKey(rec('a1', { usage: RO }));
      const outcome = await remountStale(host, 'vol1', [key('a1')], new Set([other]));
      expect(outcome.done).toEqual(new Set([key('a1')]));
    });

    test('a target on it in use: not unstaged; the others are published again from it and reported failed, naming the busy one', async () => {
      const host = new Host(rec('a1'), rec('a2'));
      host.vm.failNext('unpublish', { error: Object.assign(new Error('device busy'), { code: 'EBUSY' }) });
      const outcome = await remountStale(host, 'vol1', [key('a1'), key('a2')], new Set([STAGING]));
      expect(outcome.done).toEqual(new Set());
      expect(outcome.failed.get(key('a1'))).toBeInstanceOf(RemountBusyError);
      expect(outcome.failed.get(key('a2'))).toEqual(
        new Error(
          `its staging mount was not staged again: ${targetOf('a1')} is in use, so it was not unmounted for a remount: device busy; stop what holds it, or restart the alloc`,
        ),
      );
      expect(host.events.filter((e) => !e.startsWith('write'))).toEqual([
        'unpublish vol1 a1',
        'reported a1/data',
        'unpublish vol1 a2',
        'publish vol1 a2',
      ]);
      expect(host.records.get(key('a2'))).toMatchObject({ staged: true, published: true, remounting: 'remount' });
    });

    test('an unstage that fails: each is published again from the stale staging mount and reported failed with that error', async () => {
      const host = new Host(rec('a1'), rec('a2'));
      host.vm.failNext('unstage');
      const outcome = await remountStale(host, 'vol1', [key('a1'), key('a2')], new Set([STAGING]));
      expect(outcome.done).toEqual(new Set());
      const err = outcome.failed.get(key('a1')) as Error;
      expect(err.message).toMatch(/failed at NodeUnstageVolume: injected failure$/);
      expect(outcome.failed.get(key('a2'))).toBe(err);
      expect(host.events.filter((e) => !e.startsWith('write'))).toEqual([
        'unpublish vol1 a1',
        'unpublish vol1 a2',
        'unstage vol1',
        'publish vol1 a1',
        'publish vol1 a2',
      ]);
      expect(host.events).not.toContain('write a1/data {"staged":false}');
    });

    test('a staging mount no live key is on is left alone', async () => {
      const host = new Host(rec('a1', { staged: false }));
      const outcome = await remountStale(host, 'vol1', [key('a1')], new Set([STAGING]));
      expect(outcome.done).toEqual(new Set([key('a1')]));
      expect(host.events.filter((e) => e.startsWith('unstage'))).toEqual([]);
    });
  });
});
