// Errors of the local volume catalog. Each names the volume (and alloc or
// plugin) and says what to do; the HTTP API maps the codes to statuses.
// Claim refusals use ClaimError (volume-claimer.ts; its `retryable` tells
// the claimer's caller whether to try again); bad specs use core's
// ValidationError.
import { CsiplugError } from '@csiplug/core';

export class VolumeCatalogError extends CsiplugError {}

/** No volume with that id in the catalog. */
export class VolumeNotFoundError extends VolumeCatalogError {
  constructor(readonly volumeId: string) {
    super('EVOLUME_NOT_FOUND', `volume "${volumeId}" is not registered; see "csiplug volume status" for the volumes there are`);
  }
}

/** register/create with an id the catalog holds already. */
export class VolumeExistsError extends VolumeCatalogError {
  constructor(readonly volumeId: string) {
    super('EVOLUME_EXISTS', `volume "${volumeId}" is registered already; deregister it first or pick another id`);
  }
}

/** `volume register` of a volume the catalog has, changing what Nomad does not let change (register-update.ts); each reason says what to do. */
export class VolumeUpdateRefusedError extends VolumeCatalogError {
  constructor(
    readonly volumeId: string,
    readonly reasons: readonly string[],
  ) {
    super('EVOLUME_UPDATE_CONFLICT', `volume "${volumeId}" is registered already and cannot be updated as asked: ${reasons.join('; ')}`);
  }
}

/** register/create of a volume whose plugin volume (plugin + external id) another catalog volume has already: two volumes on one storage would write into each other and delete each other's data. */
export class VolumeExternalIdInUseError extends VolumeCatalogError {
  constructor(
    readonly volumeId: string,
    readonly pluginId: string,
    readonly externalId: string,
    readonly holderId: string,
  ) {
    super(
      'EVOLUME_EXTERNAL_ID_IN_USE',
      `volume "${volumeId}": plugin "${pluginId}" volume "${externalId}" is volume "${holderId}" already; use volume "${holderId}", or deregister it first`,
    );
  }
}

/** deregister/delete of a volume that allocs still claim. */
export class VolumeInUseError extends VolumeCatalogError {
  constructor(
    readonly volumeId: string,
    readonly allocIds: readonly string[],
    what: 'deregister' | 'delete' | 'expand',
  ) {
    super(
      'EVOLUME_IN_USE',
      `volume "${volumeId}" is claimed by alloc${allocIds.length > 1 ? 's' : ''} ${allocIds.join(', ')}; stop ${allocIds.length > 1 ? 'them' : 'it'} before you ${what} the volume` +
        (what === 'deregister' ? ' (or deregister with force)' : ''),
    );
  }
}

/** An expand of a volume whose delete is under way or was cut short (its intent stands): the delete is finished, never replaced. */
export class VolumeBeingDeletedError extends VolumeCatalogError {
  constructor(
    readonly volumeId: string,
    what: 'expand' | 'update',
  ) {
    super(
      'EVOLUME_BUSY',
      `volume "${volumeId}" is being deleted (its delete is finished once its controller plugin is ready); it cannot be ${what === 'expand' ? 'expanded' : 'updated'}`,
    );
  }
}

/** The volume's plugin cannot do what was asked (no controller, or a missing controller capability). */
export class VolumePluginError extends VolumeCatalogError {
  constructor(
    readonly volumeId: string,
    readonly pluginId: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super('EVOLUME_PLUGIN', message, options);
  }
}

/** A `volume create` of a volume that has that capacity already: nothing to change. */
export class VolumeUnchangedError extends VolumeCatalogError {
  constructor(
    readonly volumeId: string,
    capacityBytes: number,
  ) {
    super(
      'EVOLUME_EXISTS',
      `volume "${volumeId}" exists with ${capacityBytes} bytes already: nothing to change (a capacity_min above that expands it)`,
    );
  }
}

/** No controller of the plugin is registered on this node (HTTP 404). */
export class VolumePluginNotFoundError extends VolumePluginError {
  override readonly code = 'EPLUGIN_NOT_FOUND';
}

/** The plugin's controller is registered but not healthy now (HTTP 503: try again). */
export class VolumePluginUnavailableError extends VolumePluginError {
  override readonly code = 'EPLUGIN_UNAVAILABLE';
}

/** The volume's plugin is there but does not offer what was asked (a controller or node capability it lacks). */
export class VolumeUnsupportedError extends VolumePluginError {
  override readonly code = 'EVOLUME_UNSUPPORTED';
}

/** The catalog was resolved with no IVolumeSpecValidator bound: a composition mistake, not a user's. */
export class VolumeSpecValidatorMissingError extends CsiplugError {
  constructor() {
    super(
      'EVOLUME_NO_VALIDATOR',
      'the volume catalog has no volume spec check: this agent was put together without one (the csiplug agent has it), ' +
        'so it cannot check volumes before registering them; run an agent built with it, or report this with the agent log',
    );
  }
}
