// Thousands of random registry operations, interleaved with waiters (some
// with deadlines, some aborted), subscribers coming and going, failed writes
// and agent restarts, checked step by step against a plain model.
import { type Disposable, SeededRandom, ShutdownError } from '@csiplug/core';
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import { type PluginEvent, PluginWaitTimeoutError, type RegisteredPlugin, RegistryPersistError } from '.';
import { FakeRegistryStore } from './testing';
import { makeRegistry } from '../test/harness';

const TYPES = ['csi-node', 'csi-controller'];
const NAMES = ['a', 'b', 'c'];
const ALLOCS = ['alloc-0', 'alloc-1', 'alloc-2', 'alloc-3', 'alloc-4'];

interface ModelEntry {
  allocId: string;
  socketPath: string;
  restored: boolean;
}

type Outcome =
  | { kind: 'resolved'; allocId: string; socketPath: string; restored: boolean }
  | { kind: 'timeout' }
  | { kind: 'aborted' }
  | { kind: 'shutdown' };

interface WaiterCase {
  id: number;
  key: string;
  deadline: number;
  abort: AbortController;
  expected?: Outcome;
  actual?: Outcome;
  settles: number;
}

interface SubscriberCase {
  type?: string;
  sub: Disposable;
  seen: string[];
  expected: string[];
}

function describeEvent(e: PluginEvent): string {
  const p = e.plugin;
  return e.kind === 'registered'
    ? `+${p.type}/${p.name}@${p.allocId}:${p.socketPath}:${e.reason}:${e.active}`
    : `-${p.type}/${p.name}@${p.allocId}:${e.wasActive}`;
}

async function runScenario(seed: number, steps: number): Promise<{ waiters: number; events: number; restarts: number }> {
  const rnd = new SeededRandom(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd.next() * xs.length)]!;
  const clock = new FakeClock();
  const store = new FakeRegistryStore();
  const h = makeRegistry({ clock, store });

  const model = new Map<string, ModelEntry[]>();
  const listOf = (key: string) => model.get(key) ?? [];
  const waiters: WaiterCase[] = [];
  let pending: WaiterCase[] = [];
  let subscribers: SubscriberCase[] = [];
  let eventCount = 0;
  let restarts = 0;

  const expectEvent = (type: string, text: string) => {
    eventCount++;
    for (const s of subscribers) if (!s.type || s.type === type) s.expected.push(text);
  };

  const subscribe = () => {
    const type = rnd.next() < 0.5 ? undefined : pick(TYPES);
    const s: SubscriberCase = { type, seen: [], expected: [], sub: undefined as unknown as Disposable };
    const event = type ? h.registry.eventsOf(type).onDidChange : h.registry.onDidChange;
    s.sub = event((e) => s.seen.push(describeEvent(e)));
    subscribers.push(s);
  };
  // A listener that always throws must not disturb anything.
  const addThrower = () =>
    h.registry.onDidRegister(() => {
      throw new Error('bad listener');
    });
  addThrower();
  // A listener that changes the registry from inside an event: every new
  // alloc of csi-controller/c is deregistered at once, so its `registered`
  // event is delivered after the entry is gone again (waiters must not wake).
  const EPHEMERAL = 'csi-controller/c';
  const addReactor = () =>
    h.registry.onDidRegister((e) => {
      if (e.reason === 'new' && `${e.plugin.type}/${e.plugin.name}` === EPHEMERAL)
        h.registry.deregister(e.plugin.type, e.plugin.name, e.plugin.allocId);
    });
  addReactor();

  const check = () => {
    for (const type of TYPES) {
      for (const name of NAMES) {
        const key = `${type}/${name}`;
        const got = h.registry
          .registrations(type, name)
          .map((p) => ({ allocId: p.allocId, socketPath: p.socketPath, restored: p.restored }));
        expect(got).toEqual(listOf(key));
      }
    }
  };

  for (let step = 0; step < steps; step++) {
    const r = rnd.next();
    const type = pick(TYPES);
    const name = pick(NAMES);
    const key = `${type}/${name}`;
    const allocId = pick(ALLOCS);

    if (r < 0.3) {
      // register, sometimes with a new socket
      const socketPath = `/sock/${allocId}/${rnd.next() < 0.8 ? 0 : 1}`;
      const fail = rnd.next() < 0.03;
      const list = listOf(key);
      const at = list.findIndex((e) => e.allocId === allocId);
      const writes = at < 0 || list[at]!.socketPath !== socketPath;
      if (fail) store.failNextPut = new Error('injected');
      if (fail && writes) {
        expect(() => h.registry.register({ type, name, allocId, socketPath })).toThrow(RegistryPersistError);
      } else {
        h.registry.register({ type, name, allocId, socketPath });
        store.failNextPut = undefined;
        if (at < 0 && key === EPHEMERAL) {
          expectEvent(type, `+${key}@${allocId}:${socketPath}:new:true`);
          expectEvent(type, `-${key}@${allocId}:true`);
          if (list.length) expectEvent(type, `+${key}@${list[0]!.allocId}:${list[0]!.socketPath}:promoted:true`);
        } else if (at < 0) {
          const e = { allocId, socketPath, restored: false };
          model.set(key, [e, ...list]);
          expectEvent(type, `+${key}@${allocId}:${socketPath}:new:true`);
          if (list.length === 0) {
            for (const w of pending.filter((w) => w.key === key)) w.expected = { kind: 'resolved', ...e };
            pending = pending.filter((w) => w.key !== key);
          }
        } else if (writes) {
          const next = [...list];
          next[at] = { allocId, socketPath, restored: false };
          model.set(key, next);
          expectEvent(type, `+${key}@${allocId}:${socketPath}:updated:${at === 0}`);
        } else {
          const next = [...list];
          next[at] = { ...list[at]!, restored: false };
          model.set(key, next);
          if (list[at]!.restored && at === 0) expectEvent(type, `+${key}@${allocId}:${socketPath}:confirmed:true`);
        }
      }
    } else if (r < 0.5) {
      // deregister (often of an alloc that has no entry)
      const list = listOf(key);
      const at = list.findIndex((e) => e.allocId === allocId);
      const fail = rnd.next() < 0.03;
      if (fail) store.failNextPut = new Error('injected');
      if (fail && at >= 0) {
        expect(() => h.registry.deregister(type, name, allocId)).toThrow(RegistryPersistError);
      } else {
        expect(h.registry.deregister(type, name, allocId)).toBe(at >= 0);
        store.failNextPut = undefined;
        if (at >= 0) {
          const next = [...list.slice(0, at), ...list.slice(at + 1)];
          if (next.length) model.set(key, next);
          else model.delete(key);
          expectEvent(type, `-${key}@${allocId}:${at === 0}`);
          if (at === 0 && next.length) expectEvent(type, `+${key}@${next[0]!.allocId}:${next[0]!.socketPath}:promoted:true`);
        }
      }
    } else if (r < 0.72) {
      // a waiter
      const timeout = rnd.next() < 0.1 ? Infinity : Math.floor(rnd.next() * 5_000);
      const w: WaiterCase = { id: waiters.length, key, deadline: clock.now() + timeout, abort: new AbortController(), settles: 0 };
      waiters.push(w);
      const active = listOf(key)[0];
      if (active) w.expected = { kind: 'resolved', ...active };
      else pending.push(w);
      h.registry.waitForPlugin(type, name, { timeout, signal: w.abort.signal }).then(
        (p: RegisteredPlugin) => {
          w.settles++;
          w.actual = { kind: 'resolved', allocId: p.allocId, socketPath: p.socketPath, restored: p.restored };
        },
        (err: unknown) => {
          w.settles++;
          if (err instanceof PluginWaitTimeoutError) w.actual = { kind: 'timeout' };
          else if (err instanceof ShutdownError) w.actual = { kind: 'shutdown' };
          else if (err instanceof Error && err.message === 'aborted by test') w.actual = { kind: 'aborted' };
          else throw err;
        },
      );
    } else if (r < 0.77) {
      // abort a waiter (pending or not; a settled one ignores it)
      if (waiters.length) {
        const w = pick(waiters);
        if (pending.includes(w)) {
          w.expected = { kind: 'aborted' };
          pending = pending.filter((x) => x !== w);
        }
        w.abort.abort(new Error('aborted by test'));
      }
    } else if (r < 0.87) {
      // time passes
      const ms = Math.floor(rnd.next() * 1_500);
      const now = clock.now() + ms;
      for (const w of pending.filter((w) => w.deadline <= now)) w.expected = { kind: 'timeout' };
      pending = pending.filter((w) => w.deadline > now);
      await clock.advance(ms);
    } else if (r < 0.92) {
      subscribe();
    } else if (r < 0.95) {
      if (subscribers.length) {
        const s = pick(subscribers);
        s.sub.dispose();
        expect(s.seen).toEqual(s.expected);
        subscribers = subscribers.filter((x) => x !== s);
      }
    } else if (r < 0.98) {
      // the CSI manager reached a plugin
      const list = listOf(key);
      const at = list.findIndex((e) => e.allocId === allocId);
      expect(h.registry.confirmAlive(type, name, allocId)).toBe(at >= 0);
      if (at >= 0) {
        const next = [...list];
        next[at] = { ...list[at]!, restored: false };
        model.set(key, next);
      }
    } else if (r < 0.985) {
      // agent restart: pending waits are rejected, the new registry restores everything as restored
      for (const w of pending) w.expected = { kind: 'shutdown' };
      pending = [];
      for (const s of subscribers) expect(s.seen).toEqual(s.expected);
      subscribers = [];
      h.restart();
      addThrower();
      addReactor();
      restarts++;
      for (const [k, list] of model)
        model.set(
          k,
          list.map((e) => ({ ...e, restored: true })),
        );
    }
    check();
  }

  // Let every finite deadline pass, then dispose the registry for the Infinity ones.
  const end = clock.now() + 10_000;
  for (const w of pending.filter((w) => w.deadline <= end)) w.expected = { kind: 'timeout' };
  pending = pending.filter((w) => w.deadline > end);
  await clock.advance(10_000);
  for (const w of pending) w.expected = { kind: 'shutdown' };
  for (const s of subscribers) expect(s.seen).toEqual(s.expected);
  h.registry.dispose();
  await flushMicrotasks();

  for (const w of waiters) {
    expect({ id: w.id, settles: w.settles, outcome: w.actual }).toEqual({ id: w.id, settles: 1, outcome: w.expected });
  }
  // What is stored is what the model holds, in order.
  const stored = new FakeRegistryStore();
  stored.json = store.json;
  const reread = makeRegistry({ store: stored }).registry;
  for (const [key, list] of model) {
    const [type, name] = key.split('/') as [string, string];
    expect(reread.registrations(type, name).map((p) => p.allocId)).toEqual(list.map((e) => e.allocId));
  }
  return { waiters: waiters.length, events: eventCount, restarts };
}

describe('registry under random interleavings', () => {
  it.each([1, 2, 42])('matches the model, and settles every waiter exactly once (seed %i)', async (seed) => {
    const stats = await runScenario(seed, 3_000);
    expect(stats.waiters).toBeGreaterThan(400);
    expect(stats.events).toBeGreaterThan(400);
    expect(stats.restarts).toBeGreaterThan(0);
  });
});
