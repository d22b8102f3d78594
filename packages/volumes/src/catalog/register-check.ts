// The check of an existing volume against its plugin before the catalog
// registers it (ValidateVolumeCapabilities), and the CSI codes that say a
// plugin refused a request rather than failed to answer it.
import { type Logger, ValidationError, errorMessage } from '@csiplug/core';
import { type CSIClient, CSIError, GrpcStatus, isNotFound } from '@csiplug/csi';
import { type ICSIManager, volumeCapabilityFor } from '@csiplug/csimanager';
import { PluginTypeCSIController } from '@csiplug/registry';
import type { VolumeSpec } from './volume-spec';

/** CSI codes after which retrying the same claim cannot help. */
export const PERMANENT_CSI_CODES: readonly number[] = Object.freeze([
  GrpcStatus.INVALID_ARGUMENT,
  GrpcStatus.NOT_FOUND,
  GrpcStatus.ALREADY_EXISTS,
  GrpcStatus.OUT_OF_RANGE,
  GrpcStatus.UNIMPLEMENTED,
  GrpcStatus.PERMISSION_DENIED,
  GrpcStatus.UNAUTHENTICATED,
]);

/** What the check needs of the catalog. */
export interface RegisterCheckDeps {
  csi: ICSIManager;
  log: Logger;
  withController<T>(pluginId: string, fn: (client: CSIClient) => Promise<T>): Promise<T>;
}

/**
 * Register: when the plugin's controller is here and healthy, it must
 * confirm the volume's capabilities (ValidateVolumeCapabilities); one that
 * does not know the volume, or cannot serve it, refuses the register. A
 * plugin not running yet cannot be asked: the volume is registered as given.
 */
export async function checkWithPlugin(deps: RegisterCheckDeps, spec: VolumeSpec, externalId: string): Promise<void> {
  const info = deps.csi.pluginInfo(PluginTypeCSIController, spec.pluginId);
  if (!info?.controller || !info.healthy) return;
  let response;
  try {
    response = await deps.withController(spec.pluginId, (c) =>
      c.validateVolumeCapabilities({
        volumeId: externalId,
        volumeCapabilities: spec.capabilities.map((c) =>
          volumeCapabilityFor({ readOnly: false, accessMode: c.accessMode, attachmentMode: c.attachmentMode }, spec.mountOptions),
        ),
        volumeContext: { ...spec.context },
        parameters: { ...spec.parameters },
        secrets: { ...spec.secrets },
      }),
    );
  } catch (err) {
    if (isNotFound(err))
      throw new ValidationError(
        `volume "${spec.id}": plugin "${spec.pluginId}" has no volume with external_id "${externalId}" (ValidateVolumeCapabilities: NOT_FOUND)`,
        'external_id',
      );
    // A plugin's own refusal of the request (INVALID_ARGUMENT for its context, FAILED_PRECONDITION…) refuses the register.
    if (err instanceof CSIError && !err.local && PERMANENT_CSI_CODES.includes(err.grpcCode) && err.grpcCode !== GrpcStatus.UNIMPLEMENTED) {
      throw new ValidationError(`volume "${spec.id}": plugin "${spec.pluginId}" refused to check it: ${errorMessage(err)}`, 'external_id');
    }
    // The plugin could not answer (slow, restarting, UNIMPLEMENTED): that says nothing against the volume, which is registered as given.
    deps.log.warn('could not check a volume with its plugin before registering it; registered as given', {
      volume_id: spec.id,
      plugin_id: spec.pluginId,
      external_id: externalId,
      error: errorMessage(err),
    });
    return;
  }
  if (!response.confirmed) {
    const wanted = spec.capabilities.map((c) => `${c.accessMode}/${c.attachmentMode}`).join(', ');
    throw new ValidationError(
      `volume "${spec.id}": plugin "${spec.pluginId}" cannot serve it as asked (${wanted}): ${response.message || 'it confirmed none of the capabilities'}`,
      'capability',
    );
  }
}
