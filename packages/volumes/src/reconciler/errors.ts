// Errors of the volume reconciler: a mount that failed (naming the volume,
// the plugin and the cause), a remount refused because its target is in use,
// and a reconciler stopped by the agent going away.
import { CsiplugError, ShutdownError, errorMessage } from '@csiplug/core';

/** A mount that failed; says which volume, which plugin, and why. */
export class VolumeMountError extends CsiplugError {
  constructor(
    readonly volumeName: string,
    readonly volumeId: string,
    readonly pluginId: string | undefined,
    cause: unknown,
  ) {
    const plugin = pluginId ? ` on plugin ${pluginId}` : '';
    super('EVOLUME_MOUNT', `volume "${volumeName}" (${volumeId})${plugin}: ${errorMessage(cause)}`, { cause });
  }
}

/** The reconciler was stopped (agent shutdown); the records stay for the next start. A ShutdownError, so callers that handle one handle it. */
export class ReconcilerStoppedError extends ShutdownError {
  constructor() {
    super('the volume reconciler is stopped; the agent is shutting down');
  }
}

/** Words of umount(8) and of plugins for a target a process still holds. */
const BUSY = /\bEBUSY\b|target is busy|device or resource busy/i;

/** Whether an unpublish failed because the target is in use (not a fault of the plugin: retrying does not help). */
export function isTargetBusy(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    if (BUSY.test(errorMessage(e)) || (e as NodeJS.ErrnoException).code === 'EBUSY') return true;
  }
  return false;
}

/** A broken mount's remount was not done: its unpublish was refused because a process still holds the target; it is left as it is, never forced. */
export class RemountBusyError extends CsiplugError {
  constructor(
    readonly target: string,
    cause: unknown,
  ) {
    super(
      'EREMOUNT_BUSY',
      `${target} is in use, so it was not unmounted for a remount: ${errorMessage(cause)}; stop what holds it, or restart the alloc`,
      { cause },
    );
  }
}
