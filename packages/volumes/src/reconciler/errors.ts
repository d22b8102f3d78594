// Errors of the volume reconciler: a mount that failed (naming the volume,
// the plugin and the cause), and a reconciler stopped by the agent going away.
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
