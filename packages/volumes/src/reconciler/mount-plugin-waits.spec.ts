// A mount held back by its node plugin (mount-plugin-waits.ts), on its own:
// what whoever waits for the mount is told (and that a listener's fault is
// only logged), and the wait for a plugin that went away mid-mount — given a
// backoff first while the plugin still looks healthy, held to what is left of
// the phase's limit, and failing with the step's own error when none is left.
// The host is built from the package's fakes (FakeCSIManager, FakeClock,
// MemoryLogger, DefaultTimeoutPolicy with the reconciler tests' round numbers).
import { DefaultTimeoutPolicy, MemoryLogger } from '@csiplug/core';
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import { CSIPluginWaitTimeoutError } from '@csiplug/csimanager';
import { FakeCSIManager } from '@csiplug/csimanager/testing';
import { TIMEOUTS } from '../../test/support/reconciler-node';
import type { VolumeMountRecord } from './mount-record';
import { awaitPluginAgain, tellRetry, type PluginWaitHost } from './mount-plugin-waits';
import type { MountRetry } from './reconciler-service';

const PLUGIN = 'hostpath';
const RECORD: VolumeMountRecord = {
  allocId: 'a1',
  name: 'data',
  volumeId: 'vol1',
  externalId: 'ext-vol1',
  pluginId: PLUGIN,
  usage: { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' },
  desired: 'mounted',
  claimed: true,
  staged: true,
  published: true,
  attempts: 0,
  since: 0,
};

describe('tellRetry', () => {
  test('tells the listener the volume, reason, attempt, error message and delay', () => {
    const log = new MemoryLogger();
    const heard: MountRetry[] = [];
    tellRetry(log, { phase: 'prerun', onRetry: (r) => heard.push(r) }, RECORD, 'claim', 3, new Error('no free claim'), 4_000);
    expect(heard).toEqual([
      { name: 'data', volumeId: 'vol1', pluginId: PLUGIN, reason: 'claim', attempt: 3, error: 'no free claim', delayMs: 4_000 },
    ]);
    expect(log.records).toEqual([]);
  });

  test('no listener: nothing is told or logged', () => {
    const log = new MemoryLogger();
    expect(() => tellRetry(log, { phase: 'prerun' }, RECORD, 'plugin', 1, new Error('x'), 1)).not.toThrow();
    expect(log.records).toEqual([]);
  });

  test("a listener that throws is logged with the alloc, volume and its error, never the mount's fault", () => {
    const log = new MemoryLogger();
    const onRetry = () => {
      throw new Error('listener broke');
    };
    expect(() => tellRetry(log, { phase: 'prerun', onRetry }, RECORD, 'plugin', 1, new Error('x'), 1)).not.toThrow();
    expect(log.find('a mount retry listener failed', 'warn').map((l) => l.fields)).toEqual([
      { alloc_id: 'a1', volume_id: 'vol1', error: 'listener broke' },
    ]);
  });
});

describe('awaitPluginAgain', () => {
  let clock: FakeClock;
  let csi: FakeCSIManager;
  let log: MemoryLogger;
  let host: PluginWaitHost;
  const stepError = new Error('NodePublishVolume: UNAVAILABLE');

  beforeEach(() => {
    clock = new FakeClock();
    const timeouts = new DefaultTimeoutPolicy(TIMEOUTS);
    csi = new FakeCSIManager({ clock, timeouts });
    log = new MemoryLogger();
    host = {
      csi,
      clock,
      timeouts,
      log,
      pluginAway: (id) => csi.pluginInfo('csi-node', id)?.healthy !== true,
    };
  });

  /** The wait's outcome, readable without awaiting it. */
  function start(retry: number, deadline: number) {
    const t: { settled: boolean; error?: unknown } = { settled: false };
    const p = awaitPluginAgain(host, RECORD, stepError, retry, 'prerun', deadline, undefined).then(
      () => (t.settled = true),
      (e: unknown) => Object.assign(t, { settled: true, error: e }),
    );
    return Object.assign(t, { done: p });
  }

  test('no time left: fails at once with the step error, without logging or waiting', async () => {
    csi.bringUp(PLUGIN);
    csi.crash(PLUGIN);
    await expect(awaitPluginAgain(host, RECORD, stepError, 1, 'prerun', clock.now(), undefined)).rejects.toBe(stepError);
    expect(csi.waits).toEqual([]);
    expect(log.records).toEqual([]);
  });

  test('a plugin away is waited for at once, held to what is left of the deadline, with a warning', async () => {
    csi.bringUp(PLUGIN);
    csi.crash(PLUGIN);
    const waiting = start(2, clock.now() + 5_000);
    await flushMicrotasks();
    expect(csi.waits).toEqual([{ type: 'csi-node', name: PLUGIN, phase: 'prerun' }]);
    expect(
      log.find('the node plugin went away during the mount; waiting for it to be healthy, then asking again', 'warn').map((l) => l.fields),
    ).toEqual([
      { alloc_id: 'a1', volume_id: 'vol1', plugin_id: PLUGIN, retry: 2, left_ms: 5_000, error: 'NodePublishVolume: UNAVAILABLE' },
    ]);
    await clock.advance(4_999);
    expect(waiting.settled).toBe(false);
    await clock.advance(1);
    await waiting.done;
    expect(waiting.error).toBeInstanceOf(CSIPluginWaitTimeoutError);
  });

  test('a plugin away that comes back ends the wait', async () => {
    csi.bringUp(PLUGIN);
    csi.crash(PLUGIN);
    const waiting = start(1, clock.now() + 5_000);
    await flushMicrotasks();
    csi.bringUp(PLUGIN);
    await waiting.done;
    expect(waiting.error).toBeUndefined();
  });

  test('a plugin that still looks healthy is given the backoff first, then asked again', async () => {
    csi.bringUp(PLUGIN);
    const waiting = start(2, clock.now() + 30_000);
    await flushMicrotasks();
    expect(csi.waits).toEqual([]);
    await clock.advance(host.timeouts.unmountBackoff(2) - 1);
    expect(waiting.settled).toBe(false);
    await clock.advance(1);
    await waiting.done;
    expect(waiting.error).toBeUndefined();
    expect(csi.waits).toHaveLength(1);
  });

  test('a backoff that runs to the deadline: no step past it, the step error', async () => {
    csi.bringUp(PLUGIN);
    const waiting = start(3, clock.now() + 1_500);
    await clock.advance(1_499);
    expect(waiting.settled).toBe(false);
    await clock.advance(1);
    await waiting.done;
    expect(waiting.error).toBe(stepError);
    expect(csi.waits).toEqual([]);
  });
});
