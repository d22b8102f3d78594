// A mount held back by its node plugin: telling whoever waits for the mount
// (a listener's fault is logged, never the mount's), and waiting for a
// plugin that went away in the middle of a mount before the step is asked
// again — within what is left of the phase's limit.
import { errorMessage, type Clock, type Logger, type TimeoutPolicy } from '@csiplug/core';
import type { CSIManager } from '@csiplug/csimanager';
import { PluginTypeCSINode } from '@csiplug/registry';
import type { VolumeMountRecord } from './mount-record';
import type { MountOptions, MountRetry } from './reconciler-service';

/** What the wait needs of the reconciler. */
export interface PluginWaitHost {
  readonly csi: CSIManager;
  readonly clock: Clock;
  readonly timeouts: TimeoutPolicy;
  readonly log: Logger;
  pluginAway(pluginId: string): boolean;
}

/** Tells whoever waits for the mount that it is held back (a listener's fault is logged, never the mount's). */
export function tellRetry(
  log: Logger,
  options: MountOptions,
  record: VolumeMountRecord,
  reason: MountRetry['reason'],
  attempt: number,
  err: unknown,
  delayMs: number,
): void {
  if (!options.onRetry) return;
  try {
    options.onRetry({
      name: record.name,
      volumeId: record.volumeId,
      pluginId: record.pluginId,
      reason,
      attempt,
      error: errorMessage(err),
      delayMs,
    });
  } catch (listenerErr) {
    log.warn('a mount retry listener failed', { alloc_id: record.allocId, volume_id: record.volumeId, error: errorMessage(listenerErr) });
  }
}

/**
 * The node plugin went away in the middle of a mount (crashed, restarting,
 * being replaced): wait for it to be healthy again, within what is left of
 * the phase's limit, so that the step is asked again rather than the mount
 * failed. A plugin that still looks healthy (its crash not seen yet) is
 * given a backoff first. Throws the step's error when no time is left.
 */
export async function awaitPluginAgain(
  host: PluginWaitHost,
  record: VolumeMountRecord,
  err: unknown,
  retry: number,
  phase: MountOptions['phase'],
  deadline: number,
  signal: AbortSignal | undefined,
): Promise<void> {
  const left = deadline - host.clock.now();
  if (left <= 0) throw err;
  host.log.warn('the node plugin went away during the mount; waiting for it to be healthy, then asking again', {
    alloc_id: record.allocId,
    volume_id: record.volumeId,
    plugin_id: record.pluginId,
    retry,
    left_ms: left,
    error: errorMessage(err),
  });
  if (!host.pluginAway(record.pluginId)) {
    await host.clock.sleep(Math.min(left, host.timeouts.unmountBackoff(retry)), signal);
    // No step attempt past the deadline, however healthy the plugin looks now.
    if (deadline - host.clock.now() <= 0) throw err;
  }
  await host.csi.waitForPlugin(PluginTypeCSINode, record.pluginId, phase, { signal, withinMs: Math.max(0, deadline - host.clock.now()) });
}
