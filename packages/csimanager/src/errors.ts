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
 * errno codes of a fault in the agent's own process — out of file
 * descriptors or memory, interrupted, busy — which say nothing about the
 * mount, file or plugin being looked at.
 */
export const TRANSIENT_FS_ERROR_CODES: ReadonlySet<string> = new Set(['EMFILE', 'ENFILE', 'EAGAIN', 'ENOMEM', 'EINTR', 'EBUSY']);

/**
 * Whether `err`, or an error it was caused by, is a transient local fault
 * (see TRANSIENT_FS_ERROR_CODES): "unknown, try again", never "not mounted"
 * or "gone". An agent flooded with connections gets EMFILE on every open.
 */
export function isTransientFsError(err: unknown): boolean {
  const seen = new Set<unknown>();
  for (let e = err; e !== null && typeof e === 'object' && !seen.has(e); e = (e as { cause?: unknown }).cause) {
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && TRANSIENT_FS_ERROR_CODES.has(code)) return true;
  }
  return false;
}
