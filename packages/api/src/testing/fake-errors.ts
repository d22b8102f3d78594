// The errors FakeAgentService throws for volumes and routed calls: the codes
// the real catalog and controllers give (so statusForError answers as it does
// for the agent), with the fake's own short messages.
import { CsiplugError } from '@csiplug/core';

/** The volume catalog's error codes, which the fake throws for volumes (see statusForError). */
export const FakeCodes = Object.freeze({
  VolumeExists: 'EVOLUME_EXISTS',
  VolumeInUse: 'EVOLUME_IN_USE',
  VolumeNotFound: 'EVOLUME_NOT_FOUND',
});

export class FakeVolumeNotFoundError extends CsiplugError {
  constructor(volumeId: string) {
    super(FakeCodes.VolumeNotFound, `volume "${volumeId}" not found`);
  }
}

export class FakeVolumeExistsError extends CsiplugError {
  constructor(volumeId: string) {
    super(FakeCodes.VolumeExists, `volume "${volumeId}" already exists; deregister it first`);
  }
}

/** `what` says what to do about the claims: "stop them first", "stop them first or use -force". */
export class FakeVolumeInUseError extends CsiplugError {
  constructor(volumeId: string, claims: number, what: string) {
    super(FakeCodes.VolumeInUse, `volume "${volumeId}" is claimed by ${claims} alloc(s); ${what}`);
  }
}

export class FakePluginUnavailableError extends CsiplugError {
  constructor(plugin: string) {
    super('EPLUGIN_UNAVAILABLE', `no controller of plugin "${plugin}" runs on this node`);
  }
}
