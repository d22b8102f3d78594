// VolumeApiCalls: the volume, snapshot and routed CSI calls of the API client
// (/v1/volume*, /v1/cluster/csi). ApiClient extends it, so callers keep one
// flat client (`client.listVolumes()`); it holds the transport both use.
import type { VolumeSpecDocument } from '@csiplug/jobspec';
import { ApiTransport, enc, query, type ApiClientOptions } from './api-transport';
import { CSI_SECRETS_HEADER, formatCsiSecrets } from './csi-secrets';
import type {
  ExternalVolumeView,
  MountUsageView,
  RoutedAnswer,
  SnapshotListOptions,
  SnapshotRequestOptions,
  SnapshotView,
  VolumeDetachResult,
  VolumeView,
} from './service';
import {
  decodeExternalVolume,
  decodeSnapshot,
  decodeVolume,
  decodeVolumeStub,
  volumeDocumentToNomad,
  type NomadCSISnapshotCreateResponse,
  type NomadCSISnapshotListResponse,
  type NomadCSIVolume,
  type NomadCSIVolumeListExternalResponse,
  type NomadCSIVolumeListStub,
  type NomadCSIVolumeWriteRequest,
  type NomadCSIVolumeWriteResponse,
} from './wire/volume-wire';

/** The request options that carry `secrets` in Nomad's header (none when there are none). */
function secretsHeader(secrets: Record<string, string> | undefined): { headers?: Record<string, string> } {
  const value = formatCsiSecrets(secrets);
  return value === undefined ? {} : { headers: { [CSI_SECRETS_HEADER]: value } };
}

export abstract class VolumeApiCalls {
  readonly address: string;
  protected readonly transport: ApiTransport;

  constructor(options: ApiClientOptions = {}) {
    this.transport = new ApiTransport(options);
    this.address = this.transport.address;
  }

  /** Every volume, in one request: each CSIVolumeListStub carries the rest of the volume in `Csiplug` (secrets left out, as `getVolume` gives them). */
  async listVolumes(options: { pluginId?: string } = {}): Promise<VolumeView[]> {
    const stubs = await this.transport.json<NomadCSIVolumeListStub[]>(
      'GET',
      `/v1/volumes${query({ type: 'csi', plugin_id: options.pluginId })}`,
    );
    return stubs.map(decodeVolumeStub);
  }

  async getVolume(id: string): Promise<VolumeView> {
    return decodeVolume(await this.transport.json<NomadCSIVolume>('GET', `/v1/volume/csi/${enc(id)}`));
  }

  /** Adds an existing volume (external_id set) to the catalog, sent as Nomad's CSIVolumeRegisterRequest. */
  registerVolume(spec: VolumeSpecDocument): Promise<VolumeView> {
    return this.writeVolume(`/v1/volume/csi/${enc(spec.id)}`, spec);
  }

  /** Creates the volume through its plugin, then registers it (Nomad's CSIVolumeCreateRequest). */
  createVolume(spec: VolumeSpecDocument, options: { forwarded?: boolean } = {}): Promise<VolumeView> {
    return this.writeVolume(`/v1/volume/csi/${enc(spec.id)}/create${query({ forwarded: options.forwarded })}`, spec);
  }

  private async writeVolume(path: string, spec: VolumeSpecDocument): Promise<VolumeView> {
    const body: NomadCSIVolumeWriteRequest = { Volumes: [volumeDocumentToNomad(spec)] };
    const answer = await this.transport.json<NomadCSIVolumeWriteResponse>('PUT', path, { body });
    return decodeVolume(answer.Volumes[0]!);
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
  async detachVolume(id: string, node: string): Promise<VolumeDetachResult> {
    const answer = await this.transport.json<{ Csiplug?: { released?: string[] } } | null>(
      'DELETE',
      `/v1/volume/csi/${enc(id)}/detach${query({ node })}`,
    );
    return { volumeId: id, nodeId: node, released: answer?.Csiplug?.released ?? [] };
  }

  /** The plugin's own volumes, one page (ListVolumes). */
  async listExternalVolumes(
    options: { pluginId?: string; perPage?: number; nextToken?: string } = {},
  ): Promise<{ Volumes: ExternalVolumeView[]; NextToken: string }> {
    const page = await this.transport.json<NomadCSIVolumeListExternalResponse>(
      'GET',
      `/v1/volumes/external${query({ plugin_id: options.pluginId, per_page: options.perPage, next_token: options.nextToken })}`,
    );
    return { Volumes: (page.Volumes ?? []).map(decodeExternalVolume), NextToken: page.NextToken ?? '' };
  }

  /** One page of a plugin's snapshots; `secrets` go as Nomad's client sends them (the X-Nomad-CSI-Secrets header). */
  async listSnapshots(options: SnapshotListOptions = {}): Promise<{ Snapshots: SnapshotView[]; NextToken: string }> {
    const page = await this.transport.json<NomadCSISnapshotListResponse>(
      'GET',
      `/v1/volumes/snapshot${query({ plugin_id: options.pluginId, per_page: options.perPage, next_token: options.nextToken })}`,
      secretsHeader(options.secrets),
    );
    return { Snapshots: (page.Snapshots ?? []).map(decodeSnapshot), NextToken: page.NextToken ?? '' };
  }

  /** A snapshot of the volume; `secrets` (over the volume's) and `parameters` go in the body, as Nomad's CSISnapshot. */
  async createSnapshot(volumeId: string, name?: string, options: SnapshotRequestOptions = {}): Promise<SnapshotView> {
    const r = await this.transport.json<NomadCSISnapshotCreateResponse>('PUT', '/v1/volumes/snapshot', {
      body: {
        Snapshots: [
          {
            SourceVolumeID: volumeId,
            ...(name ? { Name: name } : {}),
            ...(options.secrets ? { Secrets: options.secrets } : {}),
            ...(options.parameters ? { Parameters: options.parameters } : {}),
          },
        ],
      },
    });
    return decodeSnapshot(r.Snapshots[0]!);
  }

  async deleteSnapshot(pluginId: string, snapshotId: string, options: { secrets?: Record<string, string> } = {}): Promise<void> {
    await this.transport.json(
      'DELETE',
      `/v1/volumes/snapshot${query({ plugin_id: pluginId, snapshot_id: snapshotId })}`,
      secretsHeader(options.secrets),
    );
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

  /** DeleteVolume through the plugin, then deregister; `secrets` (over the volume's) go in the X-Nomad-CSI-Secrets header, as Nomad's. */
  async deleteVolume(id: string, options: { forwarded?: boolean; secrets?: Record<string, string> } = {}): Promise<void> {
    await this.transport.json(
      'DELETE',
      `/v1/volume/csi/${enc(id)}/delete${query({ forwarded: options.forwarded })}`,
      secretsHeader(options.secrets),
    );
  }
}
