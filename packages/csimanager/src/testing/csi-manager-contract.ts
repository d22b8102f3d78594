// The plugin-wait part of the CSIManager contract (waitForPlugin,
// pluginInfo, plugins, onDidChangeHealth, onDidBecomeReady, dispose), as jest tests: run
// against FakeCSIManager and against DefaultCSIManager over the real plugin
// registry (packages/csimanager/test/csi-manager-contract.test.ts), so the
// tests of the csi hook and the volume catalog wait the way the agent does.
// The volume-manager part of the contract is not covered here.
import { AbortError, ShutdownError, TimeoutError, type TimeoutPolicy } from '@csiplug/core';
import type { FakeClock } from '@csiplug/core/testing';
import type { CSIManager, CSIPluginType } from '../csi-manager';
import { CSIPluginWaitTimeoutError } from '../errors';
import type { PluginHealthChange, PluginInfo, PluginReady } from '../plugin-info';
import type * as JestGlobals from '@jest/globals';

/** One implementation under test, made fresh for each test. */
export interface CSIManagerContractSubject {
  /** The manager, started. */
  readonly manager: CSIManager;
  /** The clock the manager times its waits on. */
  readonly clock: FakeClock;
  /** The manager's phase limits; restore's must be longer than prerun's. */
  readonly timeouts: Pick<TimeoutPolicy, 'pluginWait'>;
  /**
   * Plugin (type, name) comes up as its task would: registered (by `allocId`
   * when given — another alloc is a new instance, as in an upgrade), and
   * answering a healthy fingerprint.
   */
  bringUp(type: CSIPluginType, name: string, allocId?: string): Promise<void>;
  /** Plugin (type, name), registered, crashes: its next fingerprint fails and the manager has looked. */
  crash(type: CSIPluginType, name: string): Promise<void>;
  /** The crashed plugin answers again and the manager has looked. */
  recover(type: CSIPluginType, name: string): Promise<void>;
  /** Lets pending work (events, fingerprints) run without moving time. */
  settle(): Promise<void>;
  /** Shuts everything down and removes what the subject made. */
  cleanup(): Promise<void>;
}

/** Records how a promise settled, without awaiting it. */
function track<T>(p: Promise<T>): { readonly state: 'pending' | 'resolved' | 'rejected'; readonly value?: T; readonly error?: unknown } {
  const t: { state: 'pending' | 'resolved' | 'rejected'; value?: T; error?: unknown } = { state: 'pending' };
  p.then(
    (v) => Object.assign(t, { state: 'resolved', value: v }),
    (e: unknown) => Object.assign(t, { state: 'rejected', error: e }),
  );
  return t;
}

/** Registers the plugin-wait contract's tests under `describe(name)`; `make` runs before each test, the subject's cleanup after it. */
export function describeCSIManagerPluginWaitContract(name: string, make: () => Promise<CSIManagerContractSubject>): void {
  // Jest's functions, loaded when the suite is described (not when the testing entry is imported: it loads outside jest too); @jest/globals is an optional peer dependency.
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded lazily on purpose, as said above
  const { afterEach, beforeEach, describe, expect, it } = require('@jest/globals') as typeof JestGlobals;
  describe(`CSIManager plugin-wait contract: ${name}`, () => {
    let s: CSIManagerContractSubject;
    beforeEach(async () => {
      s = await make();
    });
    afterEach(async () => {
      await s.cleanup();
    });

    it('a plugin that is up: the wait resolves at once with its info, and pluginInfo and plugins() show it', async () => {
      await s.bringUp('csi-node', 'hp');
      const info = await s.manager.waitForPlugin('csi-node', 'hp', 'prerun');
      expect(info).toMatchObject({ type: 'csi-node', name: 'hp', healthy: true, fingerprinted: true });
      expect(typeof info.node?.nodeId).toBe('string');
      expect(s.manager.pluginInfo('csi-node', 'hp')).toMatchObject({ type: 'csi-node', name: 'hp', healthy: true });
      expect(s.manager.pluginInfo('csi-node', 'other')).toBeUndefined();
      expect(s.manager.pluginInfo('csi-controller', 'hp')).toBeUndefined();
      expect(s.manager.plugins().map((p) => `${p.type}/${p.name}`)).toEqual(['csi-node/hp']);
      expect(s.manager.plugins('csi-controller')).toEqual([]);
    });

    it('plugins() sorts by type, then name', async () => {
      await s.bringUp('csi-node', 'b');
      await s.bringUp('csi-node', 'a');
      await s.bringUp('csi-controller', 'c');
      expect(s.manager.plugins().map((p) => `${p.type}/${p.name}`)).toEqual(['csi-controller/c', 'csi-node/a', 'csi-node/b']);
      expect(s.manager.plugins('csi-node').map((p) => p.name)).toEqual(['a', 'b']);
    });

    it('a wait for a plugin not there yet resolves when it comes up, and only then', async () => {
      const waiting = track(s.manager.waitForPlugin('csi-node', 'hp', 'prerun'));
      await s.settle();
      expect(waiting.state).toBe('pending');
      await s.bringUp('csi-node', 'other');
      await s.settle();
      expect(waiting.state).toBe('pending');
      await s.bringUp('csi-node', 'hp');
      await s.settle();
      expect(waiting.state).toBe('resolved');
      expect(waiting.value).toMatchObject({ type: 'csi-node', name: 'hp', healthy: true });
    });

    it('fires a health change for a plugin’s first healthy verdict', async () => {
      const changes: PluginHealthChange[] = [];
      const sub = s.manager.onDidChangeHealth((e) => changes.push(e));
      await s.bringUp('csi-node', 'hp');
      await s.settle();
      sub.dispose();
      expect(changes).toHaveLength(1);
      expect(changes[0]).toMatchObject({ type: 'csi-node', name: 'hp', healthy: true, previous: undefined });
      expect(changes[0]!.info).toMatchObject({ type: 'csi-node', name: 'hp', healthy: true });
    });

    it('a wait for a plugin that is registered but unhealthy (crashed) waits until it is healthy again; its return is a ready event', async () => {
      await s.bringUp('csi-node', 'hp');
      const ready: PluginReady[] = [];
      const sub = s.manager.onDidBecomeReady((e) => ready.push(e));
      await s.crash('csi-node', 'hp');
      expect(s.manager.pluginInfo('csi-node', 'hp')).toMatchObject({ healthy: false, fingerprinted: true });
      const waiting = track(s.manager.waitForPlugin('csi-node', 'hp', 'prerun'));
      await s.settle();
      expect(waiting.state).toBe('pending');
      expect(ready).toEqual([]);
      await s.recover('csi-node', 'hp');
      await s.settle();
      sub.dispose();
      expect(waiting.state).toBe('resolved');
      expect(waiting.value).toMatchObject({ healthy: true });
      expect(ready).toEqual([
        expect.objectContaining({ cause: 'recovered', info: expect.objectContaining({ name: 'hp', healthy: true }) }),
      ]);
      expect(ready[0]!.replaced).toBeUndefined();
    });

    it('a new instance of a plugin (another alloc: an upgrade) is a ready event that names the one it replaced', async () => {
      const ready: PluginReady[] = [];
      const sub = s.manager.onDidBecomeReady((e) => ready.push(e));
      await s.bringUp('csi-node', 'hp', 'alloc-v1');
      await s.bringUp('csi-node', 'hp', 'alloc-v2');
      await s.settle();
      sub.dispose();
      expect(ready.map((e) => [e.cause, e.info.allocId, e.replaced?.allocId])).toEqual([
        ['started', 'alloc-v1', undefined],
        ['started', 'alloc-v2', 'alloc-v1'],
      ]);
      expect(s.manager.pluginInfo('csi-node', 'hp')?.allocId).toBe('alloc-v2');
    });

    it('a wait given withinMs gives up then, before the phase’s limit, still naming the phase', async () => {
      const waiting = track(s.manager.waitForPlugin('csi-node', 'hp', 'restore', { withinMs: 1_000 }));
      await s.clock.advance(999);
      await s.settle();
      expect(waiting.state).toBe('pending');
      await s.clock.advance(1);
      await s.settle();
      expect(waiting.error).toBeInstanceOf(CSIPluginWaitTimeoutError);
      expect(waiting.error).toMatchObject({ phase: 'restore', pluginName: 'hp' });
    });

    it('gives up at the phase’s limit, not before, with a CSIPluginWaitTimeoutError naming plugin, type and phase', async () => {
      const prerunLimit = s.timeouts.pluginWait('prerun');
      expect(s.timeouts.pluginWait('restore')).toBeGreaterThan(prerunLimit);
      const ac = new AbortController();
      const prerun = track(s.manager.waitForPlugin('csi-node', 'hp', 'prerun'));
      const restore = track(s.manager.waitForPlugin('csi-node', 'hp', 'restore', { signal: ac.signal }));
      await s.clock.advance(prerunLimit - 1);
      await s.settle();
      expect(prerun.state).toBe('pending');
      await s.clock.advance(1);
      await s.settle();
      expect(prerun.state).toBe('rejected');
      const err = prerun.error as CSIPluginWaitTimeoutError;
      expect(err).toBeInstanceOf(CSIPluginWaitTimeoutError);
      expect(err).toBeInstanceOf(TimeoutError);
      expect(err).toMatchObject({ code: 'ETIMEOUT', pluginType: 'csi-node', pluginName: 'hp', phase: 'prerun' });
      expect(err.message).toMatch(/plugin "hp" of type csi-node/);
      expect(err.message).toMatch(/prerun/);
      expect(restore.state).toBe('pending');
      ac.abort();
      await s.settle();
      expect(restore.state).toBe('rejected');
    });

    it('an abort rejects the wait with the signal’s reason (an AbortError by default), at once if aborted already', async () => {
      const ac = new AbortController();
      const waiting = track(s.manager.waitForPlugin('csi-node', 'hp', 'postrun', { signal: ac.signal }));
      await s.settle();
      ac.abort(new ShutdownError('task killed'));
      await s.settle();
      expect(waiting.error).toBeInstanceOf(ShutdownError);
      expect((waiting.error as Error).message).toBe('task killed');

      const gone = new AbortController();
      gone.abort();
      await expect(s.manager.waitForPlugin('csi-node', 'hp', 'prerun', { signal: gone.signal })).rejects.toBeInstanceOf(AbortError);
      await s.bringUp('csi-node', 'hp');
      await expect(s.manager.waitForPlugin('csi-node', 'hp', 'prerun', { signal: gone.signal })).rejects.toBeInstanceOf(AbortError);
    });

    it('a wait still pending when the manager is disposed rejects with ShutdownError, though the plugin never came', async () => {
      const waiting = track(s.manager.waitForPlugin('csi-node', 'hp', 'restore'));
      await s.settle();
      expect(waiting.state).toBe('pending');
      await s.manager.dispose();
      await s.settle();
      expect(waiting.state).toBe('rejected');
      expect(waiting.error).toBeInstanceOf(ShutdownError);
    });

    it('after dispose, waits reject with ShutdownError; dispose is idempotent', async () => {
      await s.bringUp('csi-node', 'hp');
      await s.manager.dispose();
      await s.manager.dispose();
      await expect(s.manager.waitForPlugin('csi-node', 'hp', 'prerun')).rejects.toBeInstanceOf(ShutdownError);
      await expect(s.manager.start()).rejects.toBeInstanceOf(ShutdownError);
    });

    it('each caller gets the info of the plugin it waited for', async () => {
      const a = track(s.manager.waitForPlugin('csi-node', 'a', 'prerun'));
      const c = track(s.manager.waitForPlugin('csi-controller', 'a', 'prerun'));
      await s.bringUp('csi-controller', 'a');
      await s.bringUp('csi-node', 'a');
      await s.settle();
      expect((a.value as PluginInfo | undefined)?.type).toBe('csi-node');
      expect((c.value as PluginInfo | undefined)?.type).toBe('csi-controller');
    });
  });
}
