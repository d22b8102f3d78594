// ControllerCalls: the volume catalog's calls to a volume's controller
// plugin — waiting for it (the prerun limit), checking what it offers, and
// ControllerPublishVolume / ControllerUnpublishVolume for a claim — each
// failure turned into the catalog's own error: a ClaimError (retryable or
// not, by the plugin's answer) on the claim path, a VolumePluginError
// elsewhere. The catalog decides when and writes its records; this file
// only talks to the plugin.
import { abortReason, errorMessage, TimeoutError, type Logger } from '@csiplug/core';
import { CSIError, isNotFound, type CSIClient } from '@csiplug/csi';
import { volumeCapabilityFor, type ControllerPluginInfo, type ICSIManager } from '@csiplug/csimanager';
import { PluginNotFoundError, PluginTypeCSIController, PluginTypeCSINode, type IPluginRegistry } from '@csiplug/registry';
import { VolumePluginError } from './errors';
import { PERMANENT_CSI_CODES } from './register-check';
import { ClaimError, type VolumeClaimRequest } from './volume-claimer';
import type { VolumeRecord } from './volume-record';

export class ControllerCalls {
  constructor(
    private readonly csi: ICSIManager,
    private readonly registry: IPluginRegistry,
    private readonly log: Logger,
  ) {}

  /**
   * Waits (prerun plugin wait) for the controller of `pluginId` and checks it
   * can create and delete volumes.
   */
  async controllerFor(volumeId: string, pluginId: string, what: 'create' | 'delete', signal?: AbortSignal): Promise<ControllerPluginInfo> {
    let controller: ControllerPluginInfo | undefined;
    try {
      controller = (await this.csi.waitForPlugin(PluginTypeCSIController, pluginId, 'prerun', { signal })).controller;
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      throw new VolumePluginError(
        volumeId,
        pluginId,
        `cannot ${what} volume "${volumeId}": controller plugin "${pluginId}" is not available (${errorMessage(err)})`,
        { cause: err },
      );
    }
    if (!controller?.supportsCreateDelete) {
      const instead =
        what === 'create'
          ? `create the volume on the storage side and register it with "csiplug volume register"`
          : `delete the volume on the storage side, then "csiplug volume deregister ${volumeId}"`;
      throw new VolumePluginError(
        volumeId,
        pluginId,
        `cannot ${what} volume "${volumeId}": the controller of plugin "${pluginId}" does not offer CREATE_DELETE_VOLUME; ${instead}`,
      );
    }
    return controller;
  }

  /** A client for the plugin's active controller registration, disposed after `fn`. */
  async withController<T>(pluginId: string, fn: (client: CSIClient) => Promise<T>): Promise<T> {
    const client = this.registry.dispense<CSIClient>(PluginTypeCSIController, pluginId);
    try {
      return await fn(client);
    } finally {
      client.dispose();
    }
  }

  /**
   * The controller's info when the plugin has a controller (a controller
   * instance exists, or the node plugin advertises CONTROLLER_SERVICE, in
   * which case its controller is waited for); undefined for node-only plugins.
   */
  async claimController(record: VolumeRecord, allocId: string, signal?: AbortSignal): Promise<ControllerPluginInfo | undefined> {
    try {
      return await this.controllerOf(record, signal);
    } catch (err) {
      throw this.claimFailure(
        err,
        `controller plugin "${record.pluginId}" of volume "${record.id}" is not available for alloc ${allocId}`,
        signal,
      );
    }
  }

  /** The volume's controller: the one known now, else waited for (the prerun limit) when the node plugin says there is one; undefined for a node-only plugin. Throws the wait's error. */
  async controllerOf(record: VolumeRecord, signal?: AbortSignal): Promise<ControllerPluginInfo | undefined> {
    const known = this.csi.pluginInfo(PluginTypeCSIController, record.pluginId);
    if (known?.controller) return known.controller;
    const node = this.csi.pluginInfo(PluginTypeCSINode, record.pluginId);
    if (!known && node?.pluginCapabilities?.controllerService !== true) return undefined;
    return (await this.csi.waitForPlugin(PluginTypeCSIController, record.pluginId, 'prerun', { signal })).controller;
  }

  /** ControllerPublishVolume when the plugin's controller advertises it; undefined when it does not. */
  async controllerPublish(
    record: VolumeRecord,
    request: VolumeClaimRequest,
    signal: AbortSignal | undefined,
    beforeCall: (nodeId: string) => void,
  ): Promise<{ nodeId: string; context: Record<string, string> } | undefined> {
    const controller = await this.claimController(record, request.allocId, signal);
    if (!controller?.supportsAttachDetach) return undefined;
    let nodeId: string | undefined;
    try {
      const node =
        this.csi.pluginInfo(PluginTypeCSINode, record.pluginId)?.node ??
        (await this.csi.waitForPlugin(PluginTypeCSINode, record.pluginId, 'prerun', { signal })).node;
      nodeId = node?.nodeId;
    } catch (err) {
      throw this.claimFailure(
        err,
        `node plugin "${record.pluginId}" of volume "${record.id}" is not available for alloc ${request.allocId}`,
        signal,
      );
    }
    if (!nodeId)
      throw new ClaimError(
        `node plugin "${record.pluginId}" has not reported its node id yet; volume "${record.id}" cannot be published for alloc ${request.allocId}`,
        true,
      );
    const capability = volumeCapabilityFor(
      { readOnly: request.readOnly, accessMode: request.accessMode, attachmentMode: request.attachmentMode },
      record.mountOptions,
    );
    beforeCall(nodeId);
    try {
      const response = await this.withController(record.pluginId, (c) =>
        c.controllerPublishVolume(
          {
            volumeId: record.externalId,
            nodeId,
            volumeCapability: capability,
            readonly: request.readOnly,
            secrets: { ...record.secrets },
            volumeContext: { ...record.context },
          },
          { signal },
        ),
      );
      return { nodeId, context: { ...(response.publishContext ?? {}) } };
    } catch (err) {
      throw this.claimFailure(
        err,
        `controller plugin "${record.pluginId}" could not publish volume "${record.id}" to node ${nodeId} for alloc ${request.allocId}`,
        signal,
      );
    }
  }

  async controllerUnpublish(record: VolumeRecord, allocId: string, nodeId: string, signal?: AbortSignal): Promise<void> {
    if (!this.registry.get(PluginTypeCSIController, record.pluginId)) {
      throw new VolumePluginError(
        record.id,
        record.pluginId,
        `controller plugin "${record.pluginId}" is not running, so volume "${record.id}" stays published to node ${nodeId} for alloc ${allocId}; the release is retried once the plugin is back`,
      );
    }
    try {
      await this.withController(record.pluginId, (c) =>
        c.controllerUnpublishVolume({ volumeId: record.externalId, nodeId, secrets: { ...record.secrets } }, { signal }),
      );
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      if (!isNotFound(err)) {
        throw new VolumePluginError(
          record.id,
          record.pluginId,
          `could not unpublish volume "${record.id}" from node ${nodeId} for alloc ${allocId}: ${errorMessage(err)}`,
          {
            cause: err,
          },
        );
      }
      this.log.info('volume was unpublished on the plugin already', { volume_id: record.id, alloc_id: allocId, node_id: nodeId });
    }
  }

  /** Best effort after a claim that published could not be saved. */
  async undoPublish(record: VolumeRecord, allocId: string, nodeId: string): Promise<void> {
    try {
      await this.controllerUnpublish(record, allocId, nodeId);
    } catch (err) {
      this.log.error('could not unpublish a volume whose claim was not saved; it stays attached to the node', {
        volume_id: record.id,
        alloc_id: allocId,
        node_id: nodeId,
        error: errorMessage(err),
      });
    }
  }

  /** A ClaimError for a failed wait or CSI call: retryable unless the plugin's answer rules it out. */
  claimFailure(err: unknown, what: string, signal?: AbortSignal): Error {
    if (signal?.aborted) return abortReason(signal);
    if (err instanceof ClaimError) return err;
    let retryable = false;
    if (err instanceof CSIError) retryable = !PERMANENT_CSI_CODES.includes(err.grpcCode);
    // A wait ran out, or the plugin deregistered in between (restarting): it may be back soon.
    else if (err instanceof TimeoutError || err instanceof PluginNotFoundError) retryable = true;
    return new ClaimError(`${what}: ${errorMessage(err)}`, retryable, { cause: err });
  }

  /** The controller of the volume's plugin when it has one (waited for, as for a claim); undefined for a node-only plugin. */
  async controllerIfAny(record: VolumeRecord, what: string, signal?: AbortSignal): Promise<ControllerPluginInfo | undefined> {
    try {
      return await this.controllerOf(record, signal);
    } catch (err) {
      if (signal?.aborted) throw abortReason(signal);
      throw new VolumePluginError(
        record.id,
        record.pluginId,
        `cannot ${what}: controller plugin "${record.pluginId}" is not available (${errorMessage(err)})`,
        { cause: err },
      );
    }
  }
}
