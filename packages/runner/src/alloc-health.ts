// When a new alloc of a deployment is healthy: every task has run for
// min_healthy_time without a restart, and every CSI plugin a task serves is
// registered by this alloc and healthy in the CSI manager — for a monolith
// both its controller and its node side. The supervisor hook registers a
// plugin only once it answers its probes, and the registry makes a new
// alloc's registration the active one, so "the CSI manager's instance for
// this alloc is healthy" is "registered healthy". The CSI manager keeps one
// serving instance per plugin, so when several allocs of a deployment run
// one plugin (count ≥ 2, max_parallel ≥ 2) only the newest has an instance
// there: an alloc whose registration is in the registry but no longer the
// active one (a newer alloc's came after it) is judged by that
// registration alone — its supervisor made it once the plugin answered.
// The active registration still needs the manager's healthy instance, so
// the plugin the node is served by is proven before an old one stops. A
// restored entry (from before an agent restart, not yet confirmed) proves
// nothing. It is unhealthy when a
// task dies (or the alloc fails) or when healthy_deadline passes first.
//
// The watch is driven by events — any task, alloc or plugin event of the
// alloc — and by two timers (min_healthy_time once everything is up, and
// the deadline), never by a poll.
import { type Clock, formatDuration, type Disposable, type Event } from '@csiplug/core';
import type { PluginInfo } from '@csiplug/csimanager';
import { registryTypesFor } from '@csiplug/hooks';
import type { Alloc, GroupSpec, TaskState, UpdateStrategy } from '@csiplug/jobspec';

export interface HealthReading {
  /** ready: everything up now; waiting: not yet; failed: it will not be, without a new alloc. */
  status: 'ready' | 'waiting' | 'failed';
  /** What is missing, or what failed. */
  reason: string;
  /** Restarts of all its tasks so far: a restart while min_healthy_time runs starts it again. */
  restarts: number;
}

/** A plugin's registry entries, newest (the active one) first. */
export type PluginRegistrations = (type: string, name: string) => readonly { allocId: string; restored: boolean }[];

/** Reads an alloc's health from its tasks' states, the CSI manager's plugin instances and the registry's entries. */
export function readAllocHealth(
  alloc: Alloc,
  group: GroupSpec,
  tasks: Readonly<Record<string, TaskState>>,
  plugins: readonly PluginInfo[],
  registrations: PluginRegistrations = () => [],
): HealthReading {
  let restarts = 0;
  for (const state of Object.values(tasks)) restarts += state.restarts;
  const lastEvent = (s: TaskState) => {
    const e = s.events.at(-1);
    return e ? `: ${e.type}${e.message ? ` (${e.message})` : ''}` : '';
  };
  for (const task of group.tasks) {
    const state = tasks[task.name];
    if (state?.state === 'dead')
      return { status: 'failed', reason: `task "${task.name}" is dead${state.failed ? ' (failed)' : ''}${lastEvent(state)}`, restarts };
  }
  if (alloc.clientStatus === 'failed' || alloc.clientStatus === 'complete')
    return { status: 'failed', reason: `the alloc is ${alloc.clientStatus}`, restarts };
  if (alloc.desiredStatus === 'stop') return { status: 'failed', reason: 'the alloc was stopped', restarts };
  for (const task of group.tasks) {
    const state = tasks[task.name];
    if (state?.state !== 'running')
      return { status: 'waiting', reason: `task "${task.name}" is ${state?.state ?? 'not started'}`, restarts };
  }
  for (const task of group.tasks) {
    const plugin = task.csiPlugin;
    if (!plugin) continue;
    for (const type of registryTypesFor(plugin.type)) {
      const instance = plugins.find((p) => p.type === type && p.name === plugin.id && p.allocId === alloc.id);
      if (!instance) {
        const entries = registrations(type, plugin.id);
        const own = entries.findIndex((e) => e.allocId === alloc.id && !e.restored);
        if (own > 0) continue; // registered healthy by its supervisor; a newer alloc's registration is the active one
      }
      if (!instance) return { status: 'waiting', reason: `plugin "${plugin.id}" (${type}) is not registered by this alloc yet`, restarts };
      if (!instance.healthy)
        return { status: 'waiting', reason: `plugin "${plugin.id}" (${type}) is not healthy yet: ${instance.description}`, restarts };
    }
  }
  return { status: 'ready', reason: 'every task runs and every plugin is healthy', restarts };
}

/** The alloc did not become healthy: it failed, or the deadline passed. */
export class UnhealthyAllocError extends Error {
  constructor(
    readonly allocId: string,
    readonly allocName: string,
    readonly why: string,
  ) {
    super(`alloc ${allocName} (${allocId.slice(0, 8)}) is unhealthy: ${why}`);
    this.name = 'UnhealthyAllocError';
  }
}

export interface HealthWatchOptions {
  alloc: Alloc;
  strategy: UpdateStrategy;
  clock: Clock;
  /** The alloc's health now. */
  read(): HealthReading;
  /** Fires with an alloc id whenever something that may change an alloc's health happened. */
  onChange: Event<string>;
  signal: AbortSignal;
}

/**
 * Resolves once the alloc is healthy; rejects with an UnhealthyAllocError
 * when it fails or healthy_deadline passes, or with the signal's reason.
 */
export function watchAllocHealth(options: HealthWatchOptions): Promise<void> {
  const { alloc, strategy, clock, read, onChange, signal } = options;
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const owned: Disposable[] = [];
    let readySince: { restarts: number; timer: Disposable } | undefined;
    let last = 'not checked yet';
    let settled = false;
    const finish = (err?: unknown) => {
      if (settled) return;
      settled = true;
      readySince?.timer.dispose();
      for (const d of owned) d.dispose();
      signal.removeEventListener('abort', onAbort);
      if (err === undefined) resolve();
      else reject(err);
    };
    const onAbort = () => finish(signal.reason);
    const check = (timerFired: boolean) => {
      if (settled) return;
      const now = read();
      last = now.reason;
      if (now.status === 'failed') return finish(new UnhealthyAllocError(alloc.id, alloc.name, now.reason));
      if (now.status === 'waiting' || (readySince && now.restarts !== readySince.restarts)) {
        // Down again (or restarted in between): min_healthy_time starts over once it is back up.
        readySince?.timer.dispose();
        readySince = undefined;
        if (now.status === 'waiting') return;
      }
      if (!readySince) {
        if (strategy.minHealthyTime === 0) return finish();
        readySince = { restarts: now.restarts, timer: clock.setTimeout(() => check(true), strategy.minHealthyTime) };
        return;
      }
      if (timerFired) finish();
    };
    signal.addEventListener('abort', onAbort, { once: true });
    owned.push(
      clock.setTimeout(
        () =>
          finish(
            new UnhealthyAllocError(
              alloc.id,
              alloc.name,
              `not healthy within healthy_deadline ${formatDuration(strategy.healthyDeadline)} (last: ${last})`,
            ),
          ),
        strategy.healthyDeadline,
      ),
    );
    owned.push(onChange((id) => id === alloc.id && check(false)));
    check(false);
  });
}
