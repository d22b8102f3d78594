// Errors of @csiplug/csimanager: one base class with a stable code, typed
// subclasses that name the plugin, volume or alloc, and say what to do.
import { CsiplugError, ShutdownError, TimeoutError, formatDuration } from '@csiplug/core';
import type { PluginWaitPhase } from '@csiplug/core';
import { isRetryable } from '@csiplug/csi';

export class CSIManagerError extends CsiplugError {}

/** No live instance for (type, name): the plugin is not registered, or its instance was stopped. */
export class PluginInstanceNotFoundError extends CSIManagerError {
  constructor(
    readonly pluginType: string,
    readonly pluginName: string,
  ) {
    super(
      'ECSI_PLUGIN_NOT_FOUND',
      `plugin "${pluginName}" of type ${pluginType} not found: no instance is running for it; ` +
        `check that its plugin task is running and healthy (csiplug plugin status ${pluginName}), then try again`,
    );
  }
}

/**
 * A call to a plugin instance cut short because the instance stopped (its
 * alloc deregistered, or a newer registration replaced it). A ShutdownError
 * of the instance, not of the agent: the plugin may well be back.
 */
export class PluginInstanceStoppedError extends ShutdownError {
  constructor(
    readonly pluginType: string,
    readonly pluginName: string,
    readonly allocId: string,
    reason: string,
  ) {
    super(`plugin "${pluginName}" of type ${pluginType} (alloc ${allocId}) stopped: ${reason}`);
  }
}

/** waitForPlugin ran out of its phase's time. */
export class CSIPluginWaitTimeoutError extends TimeoutError {
  constructor(
    readonly pluginType: string,
    readonly pluginName: string,
    readonly phase: PluginWaitPhase,
    readonly waitedMs: number,
    /** What it was still waiting for: a registration, a first fingerprint, or a fingerprinted instance to be healthy again. */
    readonly stage: 'register' | 'fingerprint' | 'healthy',
    options?: { cause?: unknown; lastError?: string },
  ) {
    super(
      `timed out after ${formatDuration(waitedMs)} (${phase} limit) waiting for plugin "${pluginName}" of type ${pluginType} ` +
        (stage === 'register' ? 'to register' : stage === 'fingerprint' ? 'to answer its first fingerprint' : 'to be healthy again') +
        (options?.lastError ? ` (last error: ${options.lastError})` : '') +
        `; check the plugin task's logs`,
      waitedMs,
      options,
    );
  }
}

/** A fingerprint round found the plugin unusable (e.g. an empty node id). */
export class FingerprintError extends CSIManagerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ECSI_FINGERPRINT', message, options);
  }
}

/** A registration's options do not describe usable mount paths. */
export class PluginOptionsError extends CSIManagerError {
  constructor(message: string) {
    super('ECSI_PLUGIN_OPTIONS', message);
  }
}

/** A mount or unmount step failed; names the step, volume, alloc and plugin. */
export class VolumeOperationError extends CSIManagerError {
  constructor(
    readonly operation: 'mount' | 'unmount',
    readonly volumeId: string,
    readonly allocId: string,
    readonly pluginId: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(operation === 'mount' ? 'ECSI_MOUNT' : 'ECSI_UNMOUNT', message, options);
  }
}

/**
 * Whether `err` (or an error in its `cause` chain) says the plugin is away
 * for now rather than that the call is wrong: no live instance, the instance
 * stopped under the call, or a gRPC status worth another attempt
 * (UNAVAILABLE — connection refused, a socket that is gone — RESOURCE_EXHAUSTED,
 * ABORTED). A caller that sees one waits for a healthy plugin and asks again;
 * anything else is an answer.
 */
export function isPluginUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof PluginInstanceNotFoundError || e instanceof PluginInstanceStoppedError || isRetryable(e)) return true;
  }
  return false;
}

/**
 * The transient-fault classifier lives in @csiplug/core (the task driver asks
 * it too); re-exported here so that this package's callers keep importing it
 * from the CSI manager.
 */
export { TRANSIENT_FS_ERROR_CODES, isTransientFsError } from '@csiplug/core';
