// Errors of @csiplug/registry. Registry-specific failures derive from
// RegistryError; bad input, timeouts and shutdown use (or refine) the shared
// classes of @csiplug/core so callers can catch them by kind.
import { CsiplugError, TimeoutError, ValidationError, errorMessage, formatDuration } from '@csiplug/core';

export class RegistryError extends CsiplugError {}

/** A plugin type the registry was not configured with. */
export class UnknownPluginTypeError extends ValidationError {
  constructor(
    readonly pluginType: string,
    readonly knownTypes: readonly string[],
  ) {
    super(
      `unknown plugin type "${pluginType}"; known types: ${knownTypes.join(', ')} (check the plugin's type in its task's csi_plugin block)`,
      'type',
    );
  }
}

/** No active registration for (type, name). */
export class PluginNotFoundError extends RegistryError {
  constructor(
    readonly pluginType: string,
    readonly pluginName: string,
  ) {
    super(
      'EPLUGIN_NOT_FOUND',
      `plugin "${pluginName}" of type ${pluginType} not found: it is not registered (yet); check that its plugin task is running (csiplug plugin status ${pluginName}), then try again`,
    );
  }
}

/** dispense() for a type nobody bound a dispenser for. */
export class NoDispenserError extends RegistryError {
  constructor(readonly pluginType: string) {
    super(
      'ENO_DISPENSER',
      `this agent has nothing that talks to plugins of type ${pluginType} (for csi-* types, the CSI manager): it was built without it; run an agent built with it (the csiplug agent has it)`,
    );
  }
}

/** A second dispenser for a type that has one: binding twice is an error, not an override. */
export class DuplicateDispenserError extends RegistryError {
  constructor(readonly pluginType: string) {
    super(
      'EDUPLICATE_DISPENSER',
      `a plugin dispenser for type ${pluginType} is registered already; dispose the first before registering another`,
    );
  }
}

/** Writing the registry to the client state failed; the registry did not change. */
export class RegistryPersistError extends RegistryError {
  constructor(what: string, cause: unknown) {
    super(
      'EREGISTRY_PERSIST',
      `could not persist the plugin registry (${what}): ${errorMessage(cause)}; the registry is unchanged and no event fired, retry the call`,
      { cause },
    );
  }
}

/** Reading the registry back from the client state failed. */
export class RegistryRestoreError extends RegistryError {
  constructor(cause: unknown) {
    super(
      'EREGISTRY_RESTORE',
      `could not restore the plugin registry from the client state: ${errorMessage(cause)}; fix or move the state DB and restart`,
      { cause },
    );
  }
}

/** waitForPlugin ran out of time. */
export class PluginWaitTimeoutError extends TimeoutError {
  constructor(
    readonly pluginType: string,
    readonly pluginName: string,
    readonly waitedMs: number,
  ) {
    super(`timed out after ${formatDuration(waitedMs)} waiting for plugin "${pluginName}" of type ${pluginType} to register`, waitedMs);
  }
}
