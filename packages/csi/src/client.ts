// CSIClient: a typed client for one CSI plugin socket. Every call has a
// deadline from the TimeoutPolicy (probe vs. other calls) and may carry an
// AbortSignal; retries are explicit (codes, backoff with jitter, attempt cap,
// never past the deadline); input is checked before anything is sent; errors
// become CSIError in one place (CsiUnaryCaller, unary-caller.ts, sends;
// this file holds the typed surface and the request checks).
import { type Disposable, ShutdownError, abortReason } from '@csiplug/core';
import { status as GrpcStatus } from '@grpc/grpc-js';
import type * as grpc from '@grpc/grpc-js';
import { type NodeCapabilities, nodeCapabilitiesFrom, volumeCapabilityProblems } from './capabilities';
import { type CsiEndpoint, parseEndpoint } from './endpoint';
import { CSIError } from './errors';
import { type CsiInvoker, GrpcInvoker } from './invoker';
import { type RetryOptions, resolveRetryOptions } from './retry';
import type * as T from './types';
import { CsiUnaryCaller, type CSICallOptions, type CSIClientDeps, type CsiRpc } from './unary-caller';

export { CSI_CALL_SECONDS } from './unary-caller';
export type { CSICallOptions, CSIClientDeps } from './unary-caller';

export interface ProbeResult {
  /** False while the plugin reports it is still starting. An absent `ready` means ready. */
  ready: boolean;
}

/** The contract the CSI manager consumes. One instance per plugin socket. */
export interface CSIClient extends Disposable {
  /** The endpoint this client talks to, as given. */
  readonly endpoint: string;

  // Identity
  getPluginInfo(options?: CSICallOptions): Promise<T.GetPluginInfoResponse>;
  getPluginCapabilities(options?: CSICallOptions): Promise<T.GetPluginCapabilitiesResponse>;
  probe(options?: CSICallOptions): Promise<ProbeResult>;

  // Node
  nodeGetInfo(options?: CSICallOptions): Promise<T.NodeGetInfoResponse>;
  nodeGetCapabilities(options?: CSICallOptions): Promise<T.NodeGetCapabilitiesResponse>;
  nodeStageVolume(request: T.NodeStageVolumeRequest, options?: CSICallOptions): Promise<T.NodeStageVolumeResponse>;
  nodePublishVolume(request: T.NodePublishVolumeRequest, options?: CSICallOptions): Promise<T.NodePublishVolumeResponse>;
  nodeUnpublishVolume(request: T.NodeUnpublishVolumeRequest, options?: CSICallOptions): Promise<T.NodeUnpublishVolumeResponse>;
  nodeUnstageVolume(request: T.NodeUnstageVolumeRequest, options?: CSICallOptions): Promise<T.NodeUnstageVolumeResponse>;
  nodeGetVolumeStats(request: T.NodeGetVolumeStatsRequest, options?: CSICallOptions): Promise<T.NodeGetVolumeStatsResponse>;
  nodeExpandVolume(request: T.NodeExpandVolumeRequest, options?: CSICallOptions): Promise<T.NodeExpandVolumeResponse>;

  // Controller
  controllerGetCapabilities(options?: CSICallOptions): Promise<T.ControllerGetCapabilitiesResponse>;
  createVolume(request: T.CreateVolumeRequest, options?: CSICallOptions): Promise<T.CreateVolumeResponse>;
  deleteVolume(request: T.DeleteVolumeRequest, options?: CSICallOptions): Promise<T.DeleteVolumeResponse>;
  controllerPublishVolume(request: T.ControllerPublishVolumeRequest, options?: CSICallOptions): Promise<T.ControllerPublishVolumeResponse>;
  controllerUnpublishVolume(
    request: T.ControllerUnpublishVolumeRequest,
    options?: CSICallOptions,
  ): Promise<T.ControllerUnpublishVolumeResponse>;
  validateVolumeCapabilities(
    request: T.ValidateVolumeCapabilitiesRequest,
    options?: CSICallOptions,
  ): Promise<T.ValidateVolumeCapabilitiesResponse>;
  listVolumes(request?: T.ListVolumesRequest, options?: CSICallOptions): Promise<T.ListVolumesResponse>;
  getCapacity(request?: T.GetCapacityRequest, options?: CSICallOptions): Promise<T.GetCapacityResponse>;
  controllerExpandVolume(request: T.ControllerExpandVolumeRequest, options?: CSICallOptions): Promise<T.ControllerExpandVolumeResponse>;
  controllerGetVolume(request: T.ControllerGetVolumeRequest, options?: CSICallOptions): Promise<T.ControllerGetVolumeResponse>;
  controllerModifyVolume(request: T.ControllerModifyVolumeRequest, options?: CSICallOptions): Promise<T.ControllerModifyVolumeResponse>;
  createSnapshot(request: T.CreateSnapshotRequest, options?: CSICallOptions): Promise<T.CreateSnapshotResponse>;
  deleteSnapshot(request: T.DeleteSnapshotRequest, options?: CSICallOptions): Promise<T.DeleteSnapshotResponse>;
  listSnapshots(request?: T.ListSnapshotsRequest, options?: CSICallOptions): Promise<T.ListSnapshotsResponse>;

  /**
   * Node capabilities from the last successful nodeGetCapabilities, if any.
   * The client uses them to refuse a NodePublishVolume without a staging
   * path when the plugin needs staging.
   */
  readonly knownNodeCapabilities: NodeCapabilities | undefined;

  /** Releases the connection. Calls after dispose() fail with ShutdownError. Idempotent. */
  dispose(): void;
}

export interface CSIClientOptions {
  retry?: Partial<RetryOptions>;
  /** Extra grpc-js channel options (merged over DEFAULT_CHANNEL_OPTIONS). */
  channelOptions?: grpc.ChannelOptions;
  /** Treat the plugin as needing staging even before nodeGetCapabilities was called. */
  requireStaging?: boolean;
  /** Transport override (tests). Defaults to a GrpcInvoker on the endpoint. */
  invoker?: CsiInvoker;
}

type Check = (req: Record<string, unknown>, client: GrpcCSIClient) => string | undefined;

const need =
  (...fields: string[]): Check =>
  (req) => {
    for (const f of fields) {
      const v = req[f];
      if (v === undefined || v === null || v === '') return `${snake(f)} is required`;
    }
    return undefined;
  };

const capability =
  (field: string): Check =>
  (req) =>
    volumeCapabilityProblems(req[field] as T.VolumeCapability | undefined, snake(field))[0];

const capabilities =
  (field: string): Check =>
  (req) => {
    const list = req[field] as T.VolumeCapability[] | undefined;
    if (!list || list.length === 0) return `${snake(field)} must list at least one capability`;
    for (const [i, c] of list.entries()) {
      const p = volumeCapabilityProblems(c, `${snake(field)}[${i}]`)[0];
      if (p) return p;
    }
    return undefined;
  };

function snake(camel: string): string {
  return camel.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase());
}

/** One RPC and the checks its request must pass before it is sent. */
interface MethodSpec extends CsiRpc {
  checks?: Check[];
}

const M: Record<string, MethodSpec> = {
  getPluginInfo: { service: 'identity', rpc: 'GetPluginInfo' },
  getPluginCapabilities: { service: 'identity', rpc: 'GetPluginCapabilities' },
  probe: { service: 'identity', rpc: 'Probe', probe: true },
  nodeGetInfo: { service: 'node', rpc: 'NodeGetInfo' },
  nodeGetCapabilities: { service: 'node', rpc: 'NodeGetCapabilities' },
  nodeStageVolume: {
    service: 'node',
    rpc: 'NodeStageVolume',
    checks: [need('volumeId', 'stagingTargetPath'), capability('volumeCapability')],
  },
  nodePublishVolume: {
    service: 'node',
    rpc: 'NodePublishVolume',
    checks: [
      need('volumeId', 'targetPath'),
      (req, client) =>
        client.needsStaging() && !req.stagingTargetPath
          ? 'staging_target_path is required: the plugin has the STAGE_UNSTAGE_VOLUME capability, so the volume must be staged first'
          : undefined,
      capability('volumeCapability'),
    ],
  },
  nodeUnpublishVolume: { service: 'node', rpc: 'NodeUnpublishVolume', checks: [need('volumeId', 'targetPath')] },
  nodeUnstageVolume: { service: 'node', rpc: 'NodeUnstageVolume', checks: [need('volumeId', 'stagingTargetPath')] },
  nodeGetVolumeStats: { service: 'node', rpc: 'NodeGetVolumeStats', checks: [need('volumeId', 'volumePath')] },
  nodeExpandVolume: { service: 'node', rpc: 'NodeExpandVolume', checks: [need('volumeId', 'volumePath')] },
  controllerGetCapabilities: { service: 'controller', rpc: 'ControllerGetCapabilities' },
  createVolume: { service: 'controller', rpc: 'CreateVolume', checks: [need('name'), capabilities('volumeCapabilities')] },
  deleteVolume: { service: 'controller', rpc: 'DeleteVolume', checks: [need('volumeId')] },
  controllerPublishVolume: {
    service: 'controller',
    rpc: 'ControllerPublishVolume',
    checks: [need('volumeId', 'nodeId'), capability('volumeCapability')],
  },
  controllerUnpublishVolume: { service: 'controller', rpc: 'ControllerUnpublishVolume', checks: [need('volumeId')] },
  validateVolumeCapabilities: {
    service: 'controller',
    rpc: 'ValidateVolumeCapabilities',
    checks: [need('volumeId'), capabilities('volumeCapabilities')],
  },
  listVolumes: { service: 'controller', rpc: 'ListVolumes' },
  getCapacity: { service: 'controller', rpc: 'GetCapacity' },
  controllerExpandVolume: { service: 'controller', rpc: 'ControllerExpandVolume', checks: [need('volumeId', 'capacityRange')] },
  controllerGetVolume: { service: 'controller', rpc: 'ControllerGetVolume', checks: [need('volumeId')] },
  controllerModifyVolume: { service: 'controller', rpc: 'ControllerModifyVolume', checks: [need('volumeId', 'mutableParameters')] },
  createSnapshot: { service: 'controller', rpc: 'CreateSnapshot', checks: [need('sourceVolumeId', 'name')] },
  deleteSnapshot: { service: 'controller', rpc: 'DeleteSnapshot', checks: [need('snapshotId')] },
  listSnapshots: { service: 'controller', rpc: 'ListSnapshots' },
};

const EMPTY = Object.freeze({});

export class GrpcCSIClient implements CSIClient {
  readonly endpoint: string;
  private readonly parsed: CsiEndpoint;
  private readonly invoker: CsiInvoker;
  private readonly caller: CsiUnaryCaller;
  private disposed = false;
  private nodeCaps: NodeCapabilities | undefined;

  constructor(
    endpoint: string,
    deps: CSIClientDeps,
    private readonly options: CSIClientOptions = {},
  ) {
    this.parsed = parseEndpoint(endpoint);
    this.endpoint = endpoint;
    this.invoker = options.invoker ?? new GrpcInvoker(this.parsed.target, options.channelOptions);
    this.caller = new CsiUnaryCaller(endpoint, this.invoker, deps, resolveRetryOptions(options.retry));
  }

  get knownNodeCapabilities(): NodeCapabilities | undefined {
    return this.nodeCaps;
  }

  /** @internal used by the request checks. */
  needsStaging(): boolean {
    return this.options.requireStaging === true || this.nodeCaps?.stageUnstageVolume === true;
  }

  getPluginInfo(o?: CSICallOptions) {
    return this.call<T.GetPluginInfoResponse>(M.getPluginInfo, EMPTY, o);
  }
  getPluginCapabilities(o?: CSICallOptions) {
    return this.call<T.GetPluginCapabilitiesResponse>(M.getPluginCapabilities, EMPTY, o);
  }
  async probe(o?: CSICallOptions): Promise<ProbeResult> {
    const res = await this.call<T.ProbeResponse>(M.probe, EMPTY, o);
    // The spec: an absent `ready` means the plugin is ready.
    const ready = res?.ready;
    return { ready: ready === null || ready === undefined ? true : ready.value !== false };
  }
  nodeGetInfo(o?: CSICallOptions) {
    return this.call<T.NodeGetInfoResponse>(M.nodeGetInfo, EMPTY, o);
  }
  async nodeGetCapabilities(o?: CSICallOptions) {
    const res = await this.call<T.NodeGetCapabilitiesResponse>(M.nodeGetCapabilities, EMPTY, o);
    this.nodeCaps = nodeCapabilitiesFrom(res);
    return res;
  }
  nodeStageVolume(r: T.NodeStageVolumeRequest, o?: CSICallOptions) {
    return this.call<T.NodeStageVolumeResponse>(M.nodeStageVolume, r, o);
  }
  nodePublishVolume(r: T.NodePublishVolumeRequest, o?: CSICallOptions) {
    return this.call<T.NodePublishVolumeResponse>(M.nodePublishVolume, r, o);
  }
  nodeUnpublishVolume(r: T.NodeUnpublishVolumeRequest, o?: CSICallOptions) {
    return this.call<T.NodeUnpublishVolumeResponse>(M.nodeUnpublishVolume, r, o);
  }
  nodeUnstageVolume(r: T.NodeUnstageVolumeRequest, o?: CSICallOptions) {
    return this.call<T.NodeUnstageVolumeResponse>(M.nodeUnstageVolume, r, o);
  }
  nodeGetVolumeStats(r: T.NodeGetVolumeStatsRequest, o?: CSICallOptions) {
    return this.call<T.NodeGetVolumeStatsResponse>(M.nodeGetVolumeStats, r, o);
  }
  nodeExpandVolume(r: T.NodeExpandVolumeRequest, o?: CSICallOptions) {
    return this.call<T.NodeExpandVolumeResponse>(M.nodeExpandVolume, r, o);
  }
  controllerGetCapabilities(o?: CSICallOptions) {
    return this.call<T.ControllerGetCapabilitiesResponse>(M.controllerGetCapabilities, EMPTY, o);
  }
  createVolume(r: T.CreateVolumeRequest, o?: CSICallOptions) {
    return this.call<T.CreateVolumeResponse>(M.createVolume, r, o);
  }
  deleteVolume(r: T.DeleteVolumeRequest, o?: CSICallOptions) {
    return this.call<T.DeleteVolumeResponse>(M.deleteVolume, r, o);
  }
  controllerPublishVolume(r: T.ControllerPublishVolumeRequest, o?: CSICallOptions) {
    return this.call<T.ControllerPublishVolumeResponse>(M.controllerPublishVolume, r, o);
  }
  controllerUnpublishVolume(r: T.ControllerUnpublishVolumeRequest, o?: CSICallOptions) {
    return this.call<T.ControllerUnpublishVolumeResponse>(M.controllerUnpublishVolume, r, o);
  }
  validateVolumeCapabilities(r: T.ValidateVolumeCapabilitiesRequest, o?: CSICallOptions) {
    return this.call<T.ValidateVolumeCapabilitiesResponse>(M.validateVolumeCapabilities, r, o);
  }
  listVolumes(r: T.ListVolumesRequest = {}, o?: CSICallOptions) {
    return this.call<T.ListVolumesResponse>(M.listVolumes, r, o);
  }
  getCapacity(r: T.GetCapacityRequest = {}, o?: CSICallOptions) {
    return this.call<T.GetCapacityResponse>(M.getCapacity, r, o);
  }
  controllerExpandVolume(r: T.ControllerExpandVolumeRequest, o?: CSICallOptions) {
    return this.call<T.ControllerExpandVolumeResponse>(M.controllerExpandVolume, r, o);
  }
  controllerGetVolume(r: T.ControllerGetVolumeRequest, o?: CSICallOptions) {
    return this.call<T.ControllerGetVolumeResponse>(M.controllerGetVolume, r, o);
  }
  controllerModifyVolume(r: T.ControllerModifyVolumeRequest, o?: CSICallOptions) {
    return this.call<T.ControllerModifyVolumeResponse>(M.controllerModifyVolume, r, o);
  }
  createSnapshot(r: T.CreateSnapshotRequest, o?: CSICallOptions) {
    return this.call<T.CreateSnapshotResponse>(M.createSnapshot, r, o);
  }
  deleteSnapshot(r: T.DeleteSnapshotRequest, o?: CSICallOptions) {
    return this.call<T.DeleteSnapshotResponse>(M.deleteSnapshot, r, o);
  }
  listSnapshots(r: T.ListSnapshotsRequest = {}, o?: CSICallOptions) {
    return this.call<T.ListSnapshotsResponse>(M.listSnapshots, r, o);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.invoker.dispose();
  }

  /** Refuses what must not be sent (a disposed client, an aborted signal, a request that fails its checks), then hands the call to the caller. */
  private async call<R>(m: MethodSpec, request: object, o: CSICallOptions | undefined): Promise<R> {
    if (this.disposed) throw new ShutdownError(`CSI client for ${this.endpoint} is disposed; create a new one to call ${m.rpc}`);
    const signal = o?.signal;
    if (signal?.aborted) throw abortReason(signal);
    if (m.checks) {
      for (const check of m.checks) {
        const problem = check(request as Record<string, unknown>, this);
        if (problem) {
          throw new CSIError({
            grpcCode: GrpcStatus.INVALID_ARGUMENT,
            method: m.rpc,
            endpoint: this.endpoint,
            details: problem,
            local: true,
          });
        }
      }
    }
    return this.caller.call<R>(m, request, o);
  }
}
