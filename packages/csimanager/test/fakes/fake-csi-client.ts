// A CSIClient fake: answers from settings, records every call, can fail or
// hang a method on demand, and keeps a FakeMountTable in step with stage,
// publish, unpublish and unstage the way a real plugin changes the mount table.
import { ShutdownError, raceAbort } from '@csiplug/core';
import { CSICallOptions, CSIClient, CSIClientFactory, CSIClientOptions, CSIError, GrpcStatus, NodeCapabilities, ProbeResult, nodeCapabilitiesFrom } from '@csiplug/csi';
import type * as T from '@csiplug/csi';
import { FakeMountTable } from './fake-mount-table';

export interface Call {
  method: string;
  request: Record<string, unknown>;
}

/** What every fake client of a socket answers; shared so a test can change it before or after the client exists. */
export class FakePluginBehaviour {
  ready = true;
  nodeId = 'node-1';
  maxVolumesPerNode = 0;
  topology: Record<string, string> | undefined = { zone: 'z1' };
  requiresStaging = true;
  controllerCaps: string[] = ['CREATE_DELETE_VOLUME', 'PUBLISH_UNPUBLISH_VOLUME'];
  pluginCaps: string[] = ['CONTROLLER_SERVICE'];
  /** method → error thrown by every call (until deleted). */
  readonly failures = new Map<string, Error>();
  /** method → errors thrown by the next calls, one each. */
  readonly failOnce = new Map<string, Error[]>();
  /** method → a gate the next call waits at (until released). */
  readonly gates = new Map<string, Gate>();
  readonly calls: Call[] = [];

  constructor(readonly mounts: FakeMountTable = new FakeMountTable()) {}

  callsOf(method: string): Call[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** The next call of `method` waits until the returned gate is opened. */
  gate(method: string): Gate {
    const g = new Gate();
    this.gates.set(method, g);
    return g;
  }

  failNext(method: string, err: Error): void {
    this.failOnce.set(method, [...(this.failOnce.get(method) ?? []), err]);
  }
}

export class Gate {
  private open!: () => void;
  readonly opened = new Promise<void>((r) => (this.open = r));
  /** Resolves when a call reached the gate. */
  readonly reached: Promise<void>;
  private reach!: () => void;
  constructor() {
    this.reached = new Promise<void>((r) => (this.reach = r));
  }
  arrive(): Promise<void> {
    this.reach();
    return this.opened;
  }
  release(): void {
    this.open();
  }
}

export function csiError(code: number, method: string, details = ''): CSIError {
  return new CSIError({ grpcCode: code, method, endpoint: 'fake', details });
}

export const notFound = (method: string) => csiError(GrpcStatus.NOT_FOUND, method, 'no such volume');

export class FakeCSIClient implements CSIClient {
  closed = false;
  private nodeCaps: NodeCapabilities | undefined;

  constructor(
    readonly endpoint: string,
    readonly behaviour: FakePluginBehaviour,
  ) {}

  get knownNodeCapabilities(): NodeCapabilities | undefined {
    return this.nodeCaps;
  }

  private async call<R>(method: string, request: object, o?: CSICallOptions, answer?: () => R): Promise<R> {
    if (this.closed) throw new ShutdownError(`fake CSI client for ${this.endpoint} is closed`);
    const b = this.behaviour;
    b.calls.push({ method, request: request as Record<string, unknown> });
    const gate = b.gates.get(method);
    if (gate) {
      b.gates.delete(method);
      await raceAbort(gate.arrive(), o?.signal);
    }
    if (this.closed) throw csiError(GrpcStatus.UNAVAILABLE, method, 'client closed');
    const once = b.failOnce.get(method);
    if (once?.length) throw once.shift()!;
    const fail = b.failures.get(method);
    if (fail) throw fail;
    return (answer ? answer() : {}) as R;
  }

  getPluginInfo(o?: CSICallOptions) {
    return this.call<T.GetPluginInfoResponse>('GetPluginInfo', {}, o, () => ({ name: 'fake.csi', vendorVersion: '1.0.0', manifest: {} }) as T.GetPluginInfoResponse);
  }
  getPluginCapabilities(o?: CSICallOptions) {
    return this.call('GetPluginCapabilities', {}, o, () => ({ capabilities: this.behaviour.pluginCaps.map((t) => ({ service: { type: t } })) }) as unknown as T.GetPluginCapabilitiesResponse);
  }
  probe(o?: CSICallOptions): Promise<ProbeResult> {
    return this.call('Probe', {}, o, () => ({ ready: this.behaviour.ready }));
  }
  nodeGetInfo(o?: CSICallOptions) {
    const b = this.behaviour;
    return this.call('NodeGetInfo', {}, o, () => ({ nodeId: b.nodeId, maxVolumesPerNode: String(b.maxVolumesPerNode), accessibleTopology: b.topology ? { segments: b.topology } : null }) as T.NodeGetInfoResponse);
  }
  async nodeGetCapabilities(o?: CSICallOptions) {
    const res = await this.call('NodeGetCapabilities', {}, o, () => ({ capabilities: this.behaviour.requiresStaging ? [{ rpc: { type: 'STAGE_UNSTAGE_VOLUME' } }] : [] }) as unknown as T.NodeGetCapabilitiesResponse);
    this.nodeCaps = nodeCapabilitiesFrom(res);
    return res;
  }
  nodeStageVolume(r: T.NodeStageVolumeRequest, o?: CSICallOptions) {
    return this.call('NodeStageVolume', r, o, () => {
      this.behaviour.mounts.add(r.stagingTargetPath!);
      return {} as T.NodeStageVolumeResponse;
    });
  }
  nodePublishVolume(r: T.NodePublishVolumeRequest, o?: CSICallOptions) {
    return this.call('NodePublishVolume', r, o, () => {
      this.behaviour.mounts.add(r.targetPath!);
      return {} as T.NodePublishVolumeResponse;
    });
  }
  nodeUnpublishVolume(r: T.NodeUnpublishVolumeRequest, o?: CSICallOptions) {
    return this.call('NodeUnpublishVolume', r, o, () => {
      this.behaviour.mounts.delete(r.targetPath!);
      return {} as T.NodeUnpublishVolumeResponse;
    });
  }
  nodeUnstageVolume(r: T.NodeUnstageVolumeRequest, o?: CSICallOptions) {
    return this.call('NodeUnstageVolume', r, o, () => {
      this.behaviour.mounts.delete(r.stagingTargetPath!);
      return {} as T.NodeUnstageVolumeResponse;
    });
  }
  nodeGetVolumeStats(r: T.NodeGetVolumeStatsRequest, o?: CSICallOptions) {
    return this.call<T.NodeGetVolumeStatsResponse>('NodeGetVolumeStats', r, o);
  }
  nodeExpandVolume(r: T.NodeExpandVolumeRequest, o?: CSICallOptions) {
    return this.call<T.NodeExpandVolumeResponse>('NodeExpandVolume', r, o);
  }
  controllerGetCapabilities(o?: CSICallOptions) {
    return this.call('ControllerGetCapabilities', {}, o, () => ({ capabilities: this.behaviour.controllerCaps.map((t) => ({ rpc: { type: t } })) }) as unknown as T.ControllerGetCapabilitiesResponse);
  }
  createVolume(r: T.CreateVolumeRequest, o?: CSICallOptions) {
    return this.call<T.CreateVolumeResponse>('CreateVolume', r, o);
  }
  deleteVolume(r: T.DeleteVolumeRequest, o?: CSICallOptions) {
    return this.call<T.DeleteVolumeResponse>('DeleteVolume', r, o);
  }
  controllerPublishVolume(r: T.ControllerPublishVolumeRequest, o?: CSICallOptions) {
    return this.call<T.ControllerPublishVolumeResponse>('ControllerPublishVolume', r, o);
  }
  controllerUnpublishVolume(r: T.ControllerUnpublishVolumeRequest, o?: CSICallOptions) {
    return this.call<T.ControllerUnpublishVolumeResponse>('ControllerUnpublishVolume', r, o);
  }
  validateVolumeCapabilities(r: T.ValidateVolumeCapabilitiesRequest, o?: CSICallOptions) {
    return this.call<T.ValidateVolumeCapabilitiesResponse>('ValidateVolumeCapabilities', r, o);
  }
  listVolumes(r: T.ListVolumesRequest = {}, o?: CSICallOptions) {
    return this.call<T.ListVolumesResponse>('ListVolumes', r, o);
  }
  getCapacity(r: T.GetCapacityRequest = {}, o?: CSICallOptions) {
    return this.call<T.GetCapacityResponse>('GetCapacity', r, o);
  }
  controllerExpandVolume(r: T.ControllerExpandVolumeRequest, o?: CSICallOptions) {
    return this.call<T.ControllerExpandVolumeResponse>('ControllerExpandVolume', r, o);
  }
  controllerGetVolume(r: T.ControllerGetVolumeRequest, o?: CSICallOptions) {
    return this.call<T.ControllerGetVolumeResponse>('ControllerGetVolume', r, o);
  }
  controllerModifyVolume(r: T.ControllerModifyVolumeRequest, o?: CSICallOptions) {
    return this.call<T.ControllerModifyVolumeResponse>('ControllerModifyVolume', r, o);
  }
  createSnapshot(r: T.CreateSnapshotRequest, o?: CSICallOptions) {
    return this.call<T.CreateSnapshotResponse>('CreateSnapshot', r, o);
  }
  deleteSnapshot(r: T.DeleteSnapshotRequest, o?: CSICallOptions) {
    return this.call<T.DeleteSnapshotResponse>('DeleteSnapshot', r, o);
  }
  listSnapshots(r: T.ListSnapshotsRequest = {}, o?: CSICallOptions) {
    return this.call<T.ListSnapshotsResponse>('ListSnapshots', r, o);
  }
  close(): void {
    this.closed = true;
  }
  dispose(): void {
    this.close();
  }
}

/** Makes FakeCSIClients; one behaviour per socket path, shared by every client of it. */
export class FakeCSIClientFactory implements CSIClientFactory {
  readonly clients: FakeCSIClient[] = [];
  private readonly behaviours = new Map<string, FakePluginBehaviour>();

  constructor(readonly mounts: FakeMountTable = new FakeMountTable()) {}

  behaviourOf(socketPath: string): FakePluginBehaviour {
    let b = this.behaviours.get(socketPath);
    if (!b) this.behaviours.set(socketPath, (b = new FakePluginBehaviour(this.mounts)));
    return b;
  }

  createClient(endpoint: string, _options?: CSIClientOptions): FakeCSIClient {
    const c = new FakeCSIClient(endpoint, this.behaviourOf(endpoint));
    this.clients.push(c);
    return c;
  }

  clientsOf(socketPath: string): FakeCSIClient[] {
    return this.clients.filter((c) => c.endpoint === socketPath);
  }
}
