// VolumeApiCalls: the volume, snapshot and routed CSI calls of the API client
// (/v1/volume*, /v1/cluster/csi). ApiClient extends it, so callers keep one
// flat client (`client.listVolumes()`); it holds the transport both use.
import type { VolumeSpecDocument } from '@csiplug/jobspec';
import { ApiTransport, enc, query, type ApiClientOptions } from './api-transport';
import type { ExternalVolumeView, MountUsageView, RoutedAnswer, SnapshotView, VolumeDetachResult, VolumeView } from './service';

export abstract class VolumeApiCalls {
  readonly address: string;
  protected readonly transport: ApiTransport;

  constructor(options: ApiClientOptions = {}) {
    this.transport = new ApiTransport(options);
    this.address = this.transport.address;
  }

  listVolumes(options: { pluginId?: string } = {}): Promise<VolumeView[]> {
    return this.transport.json('GET', `/v1/volumes${query({ type: 'csi', plugin_id: options.pluginId })}`);
  }

  getVolume(id: string): Promise<VolumeView> {
    return this.transport.json('GET', `/v1/volume/csi/${enc(id)}`);
  }

  /** Adds an existing volume (external_id set) to the catalog. */
  registerVolume(spec: VolumeSpecDocument): Promise<VolumeView> {
    return this.transport.json('PUT', `/v1/volume/csi/${enc(spec.id)}`, { body: { Volume: spec } });
  }

  /** Creates the volume through its plugin, then registers it. */
  createVolume(spec: VolumeSpecDocument, options: { forwarded?: boolean } = {}): Promise<VolumeView> {
    return this.transport.json('PUT', `/v1/volume/csi/${enc(spec.id)}/create${query({ forwarded: options.forwarded })}`, {
      body: { Volume: spec },
    });
  }

  async deregisterVolume(id: string, options: { force?: boolean } = {}): Promise<void> {
    await this.transport.json('DELETE', `/v1/volume/csi/${enc(id)}${query({ force: options.force })}`);
  }

  /** NodeGetVolumeStats of each live mount of the volume on the agent's node. */
  volumeUsage(id: string): Promise<MountUsageView[]> {
    return this.transport.json('GET', `/v1/volume/csi/${enc(id)}/usage`);
  }

  /** NodeGetVolumeStats of each volume the alloc has mounted. */
  allocUsage(id: string): Promise<MountUsageView[]> {
    return this.transport.json('GET', `/v1/allocation/${enc(id)}/usage`);
  }

  /** Unpublishes the volume from a node whose allocs that claim it are gone. */
  detachVolume(id: string, node: string): Promise<VolumeDetachResult> {
    return this.transport.json('DELETE', `/v1/volume/csi/${enc(id)}/detach${query({ node })}`);
  }

  /** The plugin's own volumes, one page (ListVolumes). */
  listExternalVolumes(
    options: { pluginId?: string; perPage?: number; nextToken?: string } = {},
  ): Promise<{ Volumes: ExternalVolumeView[]; NextToken: string }> {
    return this.transport.json(
      'GET',
      `/v1/volumes/external${query({ plugin_id: options.pluginId, per_page: options.perPage, next_token: options.nextToken })}`,
    );
  }

  listSnapshots(
    options: { pluginId?: string; perPage?: number; nextToken?: string } = {},
  ): Promise<{ Snapshots: SnapshotView[]; NextToken: string }> {
    return this.transport.json(
      'GET',
      `/v1/volumes/snapshot${query({ plugin_id: options.pluginId, per_page: options.perPage, next_token: options.nextToken })}`,
    );
  }

  async createSnapshot(volumeId: string, name?: string): Promise<SnapshotView> {
    const r = await this.transport.json<{ Snapshots: SnapshotView[] }>('PUT', '/v1/volumes/snapshot', {
      body: { Snapshots: [{ SourceVolumeID: volumeId, ...(name ? { Name: name } : {}) }] },
    });
    return r.Snapshots[0]!;
  }

  async deleteSnapshot(pluginId: string, snapshotId: string): Promise<void> {
    await this.transport.json('DELETE', `/v1/volumes/snapshot${query({ plugin_id: pluginId, snapshot_id: snapshotId })}`);
  }

  /** Cluster mode, agent to agent: one CSI call made on the other node's own controller of the plugin (@csiplug/cluster's routed controllers). */
  routedCsiCall(
    plugin: string,
    service: 'identity' | 'controller',
    rpc: string,
    request: unknown,
    signal?: AbortSignal,
  ): Promise<RoutedAnswer> {
    return this.transport.json('POST', `/v1/cluster/csi/${enc(plugin)}/${enc(service)}/${enc(rpc)}`, {
      body: { request },
      ...(signal ? { signal } : {}),
    });
  }

  async deleteVolume(id: string, options: { forwarded?: boolean } = {}): Promise<void> {
    await this.transport.json('DELETE', `/v1/volume/csi/${enc(id)}/delete${query({ forwarded: options.forwarded })}`);
  }
}
