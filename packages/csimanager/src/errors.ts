// Errors of @csiplug/csimanager: one base class with a stable code, typed
// subclasses that name the plugin, volume or alloc, and say what to do.
import { CsiplugError, TimeoutError, formatDuration } from '@csiplug/core';
import type { PluginWaitPhase } from '@csiplug/core';

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
        `call waitForPlugin("${pluginType}", "${pluginName}", phase) before using it, and check that its plugin task is running`,
    );
  }
}

/** waitForPlugin ran out of its phase's time. */
export class CSIPluginWaitTimeoutError extends TimeoutError {
  constructor(
    readonly pluginType: string,
    readonly pluginName: string,
    readonly phase: PluginWaitPhase,
    readonly waitedMs: number,
    readonly stage: 'register' | 'fingerprint',
    options?: { cause?: unknown; lastError?: string },
  ) {
    super(
      `timed out after ${formatDuration(waitedMs)} (${phase} limit) waiting for plugin "${pluginName}" of type ${pluginType} ` +
        (stage === 'register' ? 'to register' : 'to answer its first fingerprint') +
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
 * The transient-fault classifier lives in @csiplug/core (the task driver asks
 * it too); re-exported here so that this package's callers keep importing it
 * from the CSI manager.
 */
export { TRANSIENT_FS_ERROR_CODES, isTransientFsError } from '@csiplug/core';
