// A node plugin is not stopped while the unmounts that need it are under
// way. Stopping everything at once (a `job stop` of the workloads and of the
// plugin together, a node's share of a cluster going away) would otherwise
// kill the plugin before its consumers unpublish and unstage, and their
// volumes would stay staged — their claims held — until a plugin of the same
// id runs on the node again (nomad#11614, #22192, #8232).
//
// Before the tasks of an alloc that serves a node plugin are stopped, the
// stop waits while some volume of that plugin on this node is being
// unmounted — its record wants it unmounted, or its alloc's teardown is
// under way — and still needs the plugin (something staged or published;
// for a monolith, a claim too: its release may unpublish through the same
// alloc's controller). The pending ones are retried at once rather than at
// their backoff. It waits as long as the plugin is healthy or not judged
// yet (a restarted agent finishing a teardown), for at most a bound, and
// gives up on an unmount that failed twice meanwhile. Not when another
// instance of the plugin, not stopping itself, is registered on the node
// (an upgrade's new alloc serves the unmounts). A live mount of an alloc
// that is not ending is not waited for — it is not going anywhere — but
// said: its unmount waits for the plugin to run here again.
import { type Clock, errorMessage } from '@csiplug/core';
import type { TaskEvent } from '@csiplug/hooks';
import type { VolumeMountRecord } from '@csiplug/volumes';

/** The longest a node plugin's stop waits for the unmounts that need it (ms). */
export const PLUGIN_DRAIN_LIMIT_MS = 30_000;
/** How often the wait looks again (ms). */
export const PLUGIN_DRAIN_POLL_MS = 250;
/**
 * An unmount that failed this many times during the wait, the plugin
 * healthy, is not waited for any more: twice for one first seen fresh (its
 * first retry comes within seconds), once for one already failing when first
 * seen (its retry after that is far off on its backoff).
 */
const giveUpAfter = (attemptsWhenSeen: number) => (attemptsWhenSeen > 0 ? 1 : 2);

/** The plugin alloc waits for the unmounts that need its plugin. */
export const EVENT_PLUGIN_DRAINING = 'Waiting for unmounts';
/** It stops with unmounts still needing it (plugin unhealthy, failing, the bound passed), or with live mounts through it. */
export const EVENT_PLUGIN_LEAVES_MOUNTS = 'Volumes left mounted';

/** A node plugin an alloc serves; a monolith serves its controller too. */
export interface DrainedPlugin {
  id: string;
  monolith: boolean;
}

export interface PluginDrainDeps {
  clock: Clock;
  /** Every volume record on this node (the volume reconciler's). */
  records(): readonly VolumeMountRecord[];
  /** Whether the alloc's teardown (stop or postrun) is under way: it unmounts its volumes. */
  allocEnding(allocId: string): boolean;
  /** Registered node instances of the plugin other than `allocId`'s whose allocs are not ending. */
  otherInstances(pluginId: string, allocId: string): number;
  /** Whether the node plugin is healthy now; undefined when it is not judged yet (no fingerprint round has ended). */
  healthy(pluginId: string): boolean | undefined;
  /** Retries the plugin's pending unmounts now rather than at their backoff. */
  retryNow?(pluginId: string): void;
  /** The agent is going away, leaving its tasks running: the wait ends at its next look, saying nothing more. */
  leaving?(): boolean;
  limitMs?: number;
  pollMs?: number;
}

function describe(records: readonly VolumeMountRecord[]): string {
  const shown = records.slice(0, 5).map((r) => `${r.volumeId} (alloc ${r.allocId.slice(0, 8)})`);
  return `${shown.join(', ')}${records.length > shown.length ? ` and ${records.length - shown.length} more` : ''}`;
}

const keyOf = (r: VolumeMountRecord) => `${r.allocId}\0${r.name}`;

/**
 * Waits, before alloc `allocId`'s tasks that serve node plugins `plugins`
 * are stopped, for the unmounts that need them; says on the alloc what it
 * waits for and what it leaves. Never throws: a stop always goes on. An
 * aborted `signal` (the runner detached) or `leaving` (the agent going
 * away) ends the wait, saying nothing more.
 */
export async function drainBeforePluginStop(
  deps: PluginDrainDeps,
  allocId: string,
  plugins: readonly DrainedPlugin[],
  say: (event: TaskEvent) => void,
  signal: AbortSignal,
): Promise<void> {
  const monolith = new Set(plugins.filter((p) => p.monolith).map((p) => p.id));
  /** The plugins only this alloc serves now. */
  const sole = () => new Set(plugins.filter((p) => deps.otherInstances(p.id, allocId) === 0).map((p) => p.id));
  const needsPlugin = (r: VolumeMountRecord) => r.staged || r.published || (r.claimed && monolith.has(r.pluginId));
  const unmounting = (r: VolumeMountRecord) => r.desired === 'unmounted' || deps.allocEnding(r.allocId);
  const limitMs = deps.limitMs ?? PLUGIN_DRAIN_LIMIT_MS;
  const started = deps.clock.now();
  const event = (type: string, message: string) => say({ type, message, time: deps.clock.now() });
  /** Per record wanted unmounted: its failed attempts when the wait first saw it so. */
  const seen = new Map<string, number>();
  const failing: VolumeMountRecord[] = [];
  let waited = false;
  let ids = sole();
  try {
    for (;;) {
      if (deps.leaving?.()) return;
      ids = sole();
      const left: VolumeMountRecord[] = [];
      const prompt = new Set<string>();
      for (const r of deps.records()) {
        if (r.allocId === allocId || !ids.has(r.pluginId) || !unmounting(r) || !needsPlugin(r)) continue;
        if (r.desired === 'unmounted') {
          const first = seen.get(keyOf(r));
          if (first === undefined) {
            seen.set(keyOf(r), r.attempts);
            // Retried now, through a plugin that can serve it (one that is not would only count a failure).
            if (deps.healthy(r.pluginId) !== false) prompt.add(r.pluginId);
          } else if (r.attempts - first >= giveUpAfter(first)) {
            if (!failing.some((f) => keyOf(f) === keyOf(r))) failing.push(r);
            continue;
          }
        }
        left.push(r);
      }
      for (const p of prompt) deps.retryNow?.(p);
      if (left.length === 0) break;
      const worth = left.filter((r) => deps.healthy(r.pluginId) !== false);
      const why =
        worth.length === 0
          ? `node plugin ${[...new Set(left.map((r) => r.pluginId))].join(', ')} is not healthy`
          : deps.clock.now() - started >= limitMs
            ? `they were not done within ${Math.round(limitMs / 1000)}s`
            : undefined;
      if (why) {
        event(
          EVENT_PLUGIN_LEAVES_MOUNTS,
          `stopping with ${left.length} unmount(s) that need it not done (${why}): ${describe(left)}; they finish once a node plugin of the same id runs on this node again`,
        );
        break;
      }
      if (!waited) {
        waited = true;
        event(
          EVENT_PLUGIN_DRAINING,
          `the plugin stops once the unmounts that need it are done (up to ${Math.round(limitMs / 1000)}s): ${describe(left)}`,
        );
      }
      await deps.clock.sleep(deps.pollMs ?? PLUGIN_DRAIN_POLL_MS, signal);
    }
  } catch (err) {
    // The agent is going away (its tasks keep running), or a read failed: the stop goes on.
    if (!signal.aborted) event(EVENT_PLUGIN_LEAVES_MOUNTS, `stopping without waiting for the unmounts that need it: ${errorMessage(err)}`);
    return;
  }
  const stillFailing = failing.filter((f) => deps.records().some((r) => keyOf(r) === keyOf(f) && needsPlugin(r)));
  if (stillFailing.length) {
    const last = stillFailing[0]!.lastError;
    event(
      EVENT_PLUGIN_LEAVES_MOUNTS,
      `stopping with ${stillFailing.length} unmount(s) that failed again while it waited${last ? ` (${last})` : ''}: ${describe(stillFailing)}; they are retried once a node plugin of the same id runs on this node again`,
    );
  }
  const live = deps.records().filter((r) => r.allocId !== allocId && ids.has(r.pluginId) && !unmounting(r) && needsPlugin(r));
  if (live.length) {
    event(
      EVENT_PLUGIN_LEAVES_MOUNTS,
      `${live.length} volume(s) stay mounted through it for allocs that are not stopping: ${describe(live)}; their unmount waits until a node plugin of the same id runs on this node again`,
    );
  }
}
