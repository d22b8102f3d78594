// A node plugin is not stopped while the unmounts that need it are under
// way. Stopping everything at once (a `job stop` of the workloads and of the
// plugin together, a node's share of a cluster going away) would otherwise
// kill the plugin before its consumers unpublish and unstage, and their
// volumes would stay staged — their claims held — until a plugin of the same
// id runs on the node again (nomad#11614, #22192, #8232).
//
// Before the tasks of an alloc that serves a node plugin are stopped, the
// stop waits while some volume of that plugin on this node is being
// unmounted (its record wants it unmounted, or its alloc is ending), as long
// as the plugin is healthy (else waiting cannot help) and for at most a
// bound. Not when another instance of the plugin is registered on the node
// (an upgrade's new alloc serves the unmounts). A live mount of a running
// alloc is not waited for — it is not going anywhere — but said: its unmount
// waits for the plugin to run here again.
import { type Clock, errorMessage } from '@csiplug/core';
import type { TaskEvent } from '@csiplug/hooks';
import type { VolumeMountRecord } from '@csiplug/volumes';

/** The longest a node plugin's stop waits for the unmounts that need it (ms). */
export const PLUGIN_DRAIN_LIMIT_MS = 30_000;
/** How often the wait looks again (ms). */
export const PLUGIN_DRAIN_POLL_MS = 250;

/** The plugin alloc waits for the unmounts that need its plugin. */
export const EVENT_PLUGIN_DRAINING = 'Waiting for unmounts';
/** It stops with unmounts still needing it (plugin unhealthy, the bound passed), or with live mounts through it. */
export const EVENT_PLUGIN_LEAVES_MOUNTS = 'Volumes left mounted';

export interface PluginDrainDeps {
  clock: Clock;
  /** Every volume record on this node (the volume reconciler's). */
  records(): readonly VolumeMountRecord[];
  /** Whether the alloc is ending (stopped, or its tasks are done): its postrun unmounts its volumes. */
  allocEnding(allocId: string): boolean;
  /** Registered node instances of the plugin other than `allocId`'s. */
  otherInstances(pluginId: string, allocId: string): number;
  /** Whether the node plugin is healthy now. */
  healthy(pluginId: string): boolean;
  limitMs?: number;
  pollMs?: number;
}

function describe(records: readonly VolumeMountRecord[]): string {
  const shown = records.slice(0, 5).map((r) => `${r.volumeId} (alloc ${r.allocId.slice(0, 8)})`);
  return `${shown.join(', ')}${records.length > shown.length ? ` and ${records.length - shown.length} more` : ''}`;
}

/**
 * Waits, before alloc `allocId`'s tasks that serve node plugins `pluginIds`
 * are stopped, for the unmounts that need them; says on the alloc what it
 * waits for and what it leaves. Never throws: a stop always goes on.
 */
export async function drainBeforePluginStop(deps: PluginDrainDeps, allocId: string, pluginIds: readonly string[], say: (event: TaskEvent) => void, signal: AbortSignal): Promise<void> {
  const sole = pluginIds.filter((p) => deps.otherInstances(p, allocId) === 0);
  if (sole.length === 0) return;
  const mine = () => deps.records().filter((r) => r.allocId !== allocId && sole.includes(r.pluginId));
  const unmounting = (r: VolumeMountRecord) => r.desired === 'unmounted' || deps.allocEnding(r.allocId);
  const limitMs = deps.limitMs ?? PLUGIN_DRAIN_LIMIT_MS;
  const started = deps.clock.now();
  const event = (type: string, message: string) => say({ type, message, time: deps.clock.now() });
  let waited = false;
  try {
    for (;;) {
      const left = mine().filter(unmounting);
      if (left.length === 0) break;
      const helpful = left.filter((r) => deps.healthy(r.pluginId));
      const why =
        helpful.length === 0
          ? `node plugin ${[...new Set(left.map((r) => r.pluginId))].join(', ')} is not healthy`
          : deps.clock.now() - started >= limitMs
            ? `they were not done within ${Math.round(limitMs / 1000)}s`
            : undefined;
      if (why) {
        event(EVENT_PLUGIN_LEAVES_MOUNTS, `stopping with ${left.length} unmount(s) that need it not done (${why}): ${describe(left)}; they finish once a node plugin of the same id runs on this node again`);
        break;
      }
      if (!waited) {
        waited = true;
        event(EVENT_PLUGIN_DRAINING, `the plugin stops once the unmounts that need it are done (up to ${Math.round(limitMs / 1000)}s): ${describe(left)}`);
      }
      await deps.clock.sleep(deps.pollMs ?? PLUGIN_DRAIN_POLL_MS, signal);
    }
  } catch (err) {
    // The agent is going away (its tasks keep running), or a read failed: the stop goes on.
    if (!signal.aborted) event(EVENT_PLUGIN_LEAVES_MOUNTS, `stopping without waiting for the unmounts that need it: ${errorMessage(err)}`);
    return;
  }
  const live = mine().filter((r) => !unmounting(r));
  if (live.length) {
    event(EVENT_PLUGIN_LEAVES_MOUNTS, `${live.length} volume(s) stay published through it for running allocs: ${describe(live)}; their unmount waits until a node plugin of the same id runs on this node again`);
  }
}
