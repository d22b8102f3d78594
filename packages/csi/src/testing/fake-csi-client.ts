// A CSIClient fake for the tests of everything above the CSI client: answers
// from settings a test can change at any time, records every call, can fail
// or hang a method on demand, and keeps a FakeMountPoints in step with
// stage, publish, unpublish and unstage the way a real plugin changes the
// mount table. Where a test relies on what a plugin answers (probe,
// capabilities, node info, idempotent node calls, NOT_FOUND for a volume the
// plugin does not have), the fake answers like the reference hostpath
// plugin: describeCSIClientContract runs against both.
import { ShutdownError, abortReason, raceAbort } from '@csiplug/core';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { nodeCapabilitiesFrom, type NodeCapabilities } from '../capabilities';
import type { CSICallOptions, CSIClient, CSIClientOptions, ProbeResult } from '../client';
import { CSIError } from '../errors';
import type { CSIClientFactory } from '../tokens';
import type * as T from '../types';
import { FakeMountPoints } from './fake-mount-points';

export interface Call {
  method: string;
  request: Record<string, unknown>;
}

/** A scripted Probe answer: a result, or an error to throw. Called once per probe. */
export type ProbeScript = () => ProbeResult | Error;

/** What every fake client of one socket answers; shared, so a test can change it before or after the client exists. */
export class FakePluginBehaviour {
  /** GetPluginInfo. */
  name = 'fake.csi';
  vendorVersion = '1.0.0';
  /** Probe's answer (unless a ProbeScript answers; see FakeCSIClientFactory.probe). */
  ready = true;
  nodeId = 'node-1';
  maxVolumesPerNode = 0;
  topology: Record<string, string> | undefined = { zone: 'z1' };
  requiresStaging = true;
  controllerCaps: string[] = ['CREATE_DELETE_VOLUME', 'PUBLISH_UNPUBLISH_VOLUME'];
  pluginCaps: string[] = ['CONTROLLER_SERVICE'];
  /**
   * The volumes the plugin has, by volume id. A real plugin answers
   * NOT_FOUND on stage, publish, unpublish and unstage of any other id (after
   * clearing the path on unpublish and unstage); so does the fake once this
   * is a Set (CreateVolume adds to it, DeleteVolume removes). 'any', the
   * default, has every id exist: for node-side tests that never model
   * CreateVolume.
   */
  volumes: Set<string> | 'any' = 'any';
  /** ControllerPublishVolume's publish_context; unset, the answer has none. */
  publishContext: Record<string, string> | undefined;
  /** method → error thrown by every call (until deleted). */
  readonly failures = new Map<string, Error>();
  /** method → errors thrown by the next calls, one each. */
  readonly failOnce = new Map<string, Error[]>();
  /** method → a gate the next call waits at (until released). */
  readonly gates = new Map<string, Gate>();
  /** method → the answer to each call (given the request), in place of the fake's own; for RPCs a test scripts (ListVolumes, CreateSnapshot…). */
  readonly answers = new Map<string, (request: Record<string, unknown>) => unknown>();
  readonly calls: Call[] = [];

  constructor(readonly mounts: FakeMountPoints = new FakeMountPoints()) {}

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

  /** Whether the plugin has volume `id` (see `volumes`). */
  hasVolume(id: string): boolean {
    return this.volumes === 'any' || this.volumes.has(id);
  }
}

/** Holds a call until released; `reached` says a call got there. */
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

/** A CSIError as the client reports a plugin's answer with gRPC status `code`. */
export function csiError(code: number, method: string, details = ''): CSIError {
  return new CSIError({ grpcCode: code, method, endpoint: 'fake', details });
}

export const notFound = (method: string, details = 'no such volume') => csiError(GrpcStatus.NOT_FOUND, method, details);

export class FakeCSIClient implements CSIClient {
  /** Set by dispose(); calls after it fail like the real client's. */
  disposed = false;
  /** Probe calls made through this client. */
  probes = 0;
  private nodeCaps: NodeCapabilities | undefined;

  constructor(
    readonly endpoint: string,
    readonly behaviour: FakePluginBehaviour,
    /** Where a factory-wide ProbeScript comes from, if any. */
    private readonly scripts: { readonly probe?: ProbeScript } = {},
  ) {}

  get knownNodeCapabilities(): NodeCapabilities | undefined {
    return this.nodeCaps;
  }

  private async call<R>(method: string, request: object, o?: CSICallOptions, answer?: () => R): Promise<R> {
    if (this.disposed) throw new ShutdownError(`fake CSI client for ${this.endpoint} is disposed; create a new one to call ${method}`);
    if (o?.signal?.aborted) throw abortReason(o.signal);
    const b = this.behaviour;
    b.calls.push({ method, request: request as Record<string, unknown> });
    const gate = b.gates.get(method);
    if (gate) {
      b.gates.delete(method);
      await raceAbort(gate.arrive(), o?.signal);
    }
    if (this.disposed) throw csiError(GrpcStatus.UNAVAILABLE, method, 'client disposed');
    const once = b.failOnce.get(method);
    if (once?.length) throw once.shift()!;
    const fail = b.failures.get(method);
    if (fail) throw fail;
    const scripted = b.answers.get(method);
    if (scripted) return scripted(request as Record<string, unknown>) as R;
    return (answer ? answer() : {}) as R;
  }

  /** NOT_FOUND unless the plugin has the volume, as a real plugin answers. */
  private requireVolume(method: string, volumeId: string | undefined): void {
    if (!this.behaviour.hasVolume(volumeId ?? '')) throw notFound(method, `${method}: volume "${volumeId}" does not exist`);
  }

  getPluginInfo(o?: CSICallOptions) {
    const b = this.behaviour;
    return this.call<T.GetPluginInfoResponse>('GetPluginInfo', {}, o, () => ({
      name: b.name,
      vendorVersion: b.vendorVersion,
      manifest: {},
    }));
  }
  getPluginCapabilities(o?: CSICallOptions) {
    return this.call(
      'GetPluginCapabilities',
      {},
      o,
      () =>
        ({ capabilities: this.behaviour.pluginCaps.map((t) => ({ service: { type: t } })) }) as unknown as T.GetPluginCapabilitiesResponse,
    );
  }
  probe(o?: CSICallOptions): Promise<ProbeResult> {
    this.probes++;
    return this.call('Probe', {}, o, () => {
      const script = this.scripts.probe;
      if (!script) return { ready: this.behaviour.ready };
      const answer = script();
      if (answer instanceof Error) throw answer;
      return answer;
    });
  }
  nodeGetInfo(o?: CSICallOptions) {
    const b = this.behaviour;
    return this.call(
      'NodeGetInfo',
      {},
      o,
      () =>
        ({
          nodeId: b.nodeId,
          maxVolumesPerNode: String(b.maxVolumesPerNode),
          accessibleTopology: b.topology ? { segments: b.topology } : null,
        }) as T.NodeGetInfoResponse,
    );
  }
  async nodeGetCapabilities(o?: CSICallOptions) {
    const res = await this.call(
      'NodeGetCapabilities',
      {},
      o,
      () =>
        ({
          capabilities: this.behaviour.requiresStaging ? [{ rpc: { type: 'STAGE_UNSTAGE_VOLUME' } }] : [],
        }) as unknown as T.NodeGetCapabilitiesResponse,
    );
    this.nodeCaps = nodeCapabilitiesFrom(res);
    return res;
  }
  nodeStageVolume(r: T.NodeStageVolumeRequest, o?: CSICallOptions) {
    return this.call('NodeStageVolume', r, o, () => {
      this.requireVolume('NodeStageVolume', r.volumeId);
      this.behaviour.mounts.mark(r.stagingTargetPath!);
      return {} as T.NodeStageVolumeResponse;
    });
  }
  nodePublishVolume(r: T.NodePublishVolumeRequest, o?: CSICallOptions) {
    return this.call('NodePublishVolume', r, o, () => {
      this.requireVolume('NodePublishVolume', r.volumeId);
      this.behaviour.mounts.mark(r.targetPath!);
      return {} as T.NodePublishVolumeResponse;
    });
  }
  nodeUnpublishVolume(r: T.NodeUnpublishVolumeRequest, o?: CSICallOptions) {
    return this.call('NodeUnpublishVolume', r, o, () => {
      // The path is the caller's: cleared even for a volume the plugin does not have.
      this.behaviour.mounts.unmark(r.targetPath!);
      this.requireVolume('NodeUnpublishVolume', r.volumeId);
      return {} as T.NodeUnpublishVolumeResponse;
    });
  }
  nodeUnstageVolume(r: T.NodeUnstageVolumeRequest, o?: CSICallOptions) {
    return this.call('NodeUnstageVolume', r, o, () => {
      this.behaviour.mounts.unmark(r.stagingTargetPath!);
      this.requireVolume('NodeUnstageVolume', r.volumeId);
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
    return this.call(
      'ControllerGetCapabilities',
      {},
      o,
      () =>
        ({
          capabilities: this.behaviour.controllerCaps.map((t) => ({ rpc: { type: t } })),
        }) as unknown as T.ControllerGetCapabilitiesResponse,
    );
  }
  createVolume(r: T.CreateVolumeRequest, o?: CSICallOptions) {
    return this.call<T.CreateVolumeResponse>('CreateVolume', r, o, () => {
      // Idempotent by name, like a real plugin: the same name is the same volume.
      const volumeId = `fake-${r.name}`;
      const b = this.behaviour;
      if (b.volumes !== 'any') b.volumes.add(volumeId);
      const capacity = r.capacityRange?.requiredBytes ?? r.capacityRange?.limitBytes ?? 0;
      return {
        volume: {
          volumeId,
          capacityBytes: String(capacity),
          volumeContext: { name: r.name ?? '' },
          contentSource: null,
          accessibleTopology: b.topology ? [{ segments: b.topology }] : [],
        },
      };
    });
  }
  deleteVolume(r: T.DeleteVolumeRequest, o?: CSICallOptions) {
    return this.call<T.DeleteVolumeResponse>('DeleteVolume', r, o, () => {
      const b = this.behaviour;
      if (b.volumes !== 'any') b.volumes.delete(r.volumeId ?? '');
      return {};
    });
  }
  controllerPublishVolume(r: T.ControllerPublishVolumeRequest, o?: CSICallOptions) {
    return this.call<T.ControllerPublishVolumeResponse>('ControllerPublishVolume', r, o, () => {
      const context = this.behaviour.publishContext;
      return (context === undefined ? {} : { publishContext: { ...context } }) as T.ControllerPublishVolumeResponse;
    });
  }
  controllerUnpublishVolume(r: T.ControllerUnpublishVolumeRequest, o?: CSICallOptions) {
    return this.call<T.ControllerUnpublishVolumeResponse>('ControllerUnpublishVolume', r, o);
  }
  /** NOT_FOUND for a volume the plugin does not have; every capability confirmed otherwise (script `answers` to refuse). */
  validateVolumeCapabilities(r: T.ValidateVolumeCapabilitiesRequest, o?: CSICallOptions) {
    return this.call<T.ValidateVolumeCapabilitiesResponse>('ValidateVolumeCapabilities', r, o, () => {
      this.requireVolume('ValidateVolumeCapabilities', r.volumeId);
      return {
        confirmed: {
          volumeCapabilities: r.volumeCapabilities ?? [],
          volumeContext: { ...(r.volumeContext ?? {}) },
          parameters: { ...(r.parameters ?? {}) },
        },
      } as T.ValidateVolumeCapabilitiesResponse;
    });
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
  dispose(): void {
    this.disposed = true;
  }
}

/** Makes FakeCSIClients; one behaviour per socket path, shared by every client of it. */
export class FakeCSIClientFactory implements CSIClientFactory {
  readonly clients: FakeCSIClient[] = [];
  /**
   * When set, answers every client's Probe (of any socket), called once per
   * probe: for tests of a plugin coming up, failing and recovering. Unset,
   * each socket's behaviour answers (`ready`, `failures`).
   */
  probe: ProbeScript | undefined;
  private readonly behaviours = new Map<string, FakePluginBehaviour>();

  constructor(readonly mounts: FakeMountPoints = new FakeMountPoints()) {}

  behaviourOf(socketPath: string): FakePluginBehaviour {
    let b = this.behaviours.get(socketPath);
    if (!b) this.behaviours.set(socketPath, (b = new FakePluginBehaviour(this.mounts)));
    return b;
  }

  createClient(endpoint: string, _options?: CSIClientOptions): FakeCSIClient {
    const c = new FakeCSIClient(endpoint, this.behaviourOf(endpoint), this);
    this.clients.push(c);
    return c;
  }

  clientsOf(socketPath: string): FakeCSIClient[] {
    return this.clients.filter((c) => c.endpoint === socketPath);
  }

  /** Probe calls made through every client so far. */
  get totalProbes(): number {
    return this.clients.reduce((n, c) => n + c.probes, 0);
  }
}
