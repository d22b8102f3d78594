// One live plugin instance: the CSI client for one registration of (type,
// name), fingerprinted at once and then on the heartbeat strategy's period.
// Plugin capabilities and node info are fetched once and cached; every round
// probes and reads the node or controller capabilities. Each call is bounded
// by the TimeoutPolicy. Health changes are reported to the owner.
import {
  type Clock,
  type Disposable,
  type HeartbeatStrategy,
  type Logger,
  TimeoutError,
  type TimeoutPolicy,
  errorMessage,
  raceAbort,
} from '@csiplug/core';
import {
  type CSICallOptions,
  type CSIClient,
  type NodeCapabilities,
  type PluginCapabilities,
  controllerCapabilitiesFrom,
  nodeCapabilitiesFrom,
  pluginCapabilitiesFrom,
} from '@csiplug/csi';
import type { RegisteredPlugin } from '@csiplug/registry';
import { FingerprintError, PluginInstanceStoppedError } from './errors';
import type { ControllerPluginInfo, NodePluginInfo, PluginHealthChange, PluginInfo } from './plugin-info';
import type { PluginDeployment } from './plugin-options';

export interface PluginInstanceDeps {
  clock: Clock;
  logger: Logger;
  timeouts: TimeoutPolicy;
  heartbeat: HeartbeatStrategy;
  /** Called when the healthy flag changes (and for the first verdict). */
  onHealthChange(change: PluginHealthChange): void;
  /**
   * Called after every successful round: `first` for the instance's first
   * one, `recovered` for one that follows unhealthy rounds.
   */
  onFingerprinted(instance: PluginInstance, round: { first: boolean; recovered: boolean }): void;
}

interface NodeIdentity {
  nodeId: string;
  maxVolumes: number;
  topology?: Readonly<Record<string, string>>;
}

export class PluginInstance implements Disposable {
  readonly type: string;
  readonly name: string;
  readonly allocId: string;
  private readonly log: Logger;
  private readonly stopController = new AbortController();
  private timer: Disposable | undefined;
  private round: Promise<void> | undefined;
  private followUp: Promise<void> | undefined;
  private started = false;

  private healthy = false;
  private verdict = false;
  private succeeded = false;
  private description = 'not fingerprinted yet';
  private lastError: string | undefined;
  private updateTime: number;
  private pluginCaps: PluginCapabilities | undefined;
  private nodeCaps: NodeCapabilities | undefined;
  private nodeIdentity: NodeIdentity | undefined;
  private controllerInfo: ControllerPluginInfo | undefined;

  constructor(
    readonly registration: RegisteredPlugin,
    readonly deployment: PluginDeployment,
    readonly client: CSIClient,
    private readonly deps: PluginInstanceDeps,
  ) {
    this.type = registration.type;
    this.name = registration.name;
    this.allocId = registration.allocId;
    this.log = deps.logger.child({ component: 'csi-plugin-instance', type: this.type, name: this.name, allocId: this.allocId });
    this.updateTime = deps.clock.now();
  }

  get isStopped(): boolean {
    return this.stopController.signal.aborted;
  }

  /** Whether a fingerprint round has succeeded since the instance started. */
  get hasFingerprinted(): boolean {
    return this.succeeded;
  }

  get isHealthy(): boolean {
    return this.healthy;
  }

  /** Fingerprints at once, then on the heartbeat strategy's period. */
  start(): void {
    if (this.started || this.isStopped) return;
    this.started = true;
    void this.fingerprint().finally(() => this.scheduleNext());
  }

  /** Runs one fingerprint round now, or joins the one under way. */
  fingerprint(): Promise<void> {
    if (this.isStopped) return Promise.resolve();
    this.round ??= this.runRound().finally(() => {
      this.round = undefined;
    });
    return this.round;
  }

  /**
   * A round that starts after this call. A round already under way may have
   * asked before the news (e.g. the plugin re-registered after an agent
   * restart), so if it ends unhealthy one more round follows at once instead
   * of at the next period.
   */
  fingerprintAfterNews(): Promise<void> {
    if (this.isStopped) return Promise.resolve();
    if (!this.round) return this.fingerprint();
    this.followUp ??= this.round.then(() => {
      this.followUp = undefined;
      return this.isHealthy ? undefined : this.fingerprint();
    });
    return this.followUp;
  }

  /** Node capabilities from the last round, or asked for now if no round got them yet. */
  async nodeCapabilities(signal?: AbortSignal): Promise<NodeCapabilities> {
    if (this.nodeCaps) return this.nodeCaps;
    const res = await this.bounded('NodeGetCapabilities', this.deps.timeouts.csiCall(), (o) => this.client.nodeGetCapabilities(o), signal);
    this.nodeCaps = nodeCapabilitiesFrom(res);
    return this.nodeCaps;
  }

  /** The node id once NodeGetInfo has answered. */
  get nodeId(): string | undefined {
    return this.nodeIdentity?.nodeId;
  }

  info(): PluginInfo {
    const r = this.registration;
    const info: PluginInfo = {
      type: this.type,
      name: this.name,
      allocId: this.allocId,
      socketPath: r.socketPath,
      version: r.version,
      deployment: this.deployment,
      healthy: this.healthy,
      fingerprinted: this.succeeded,
      description: this.description,
      ...(this.lastError !== undefined ? { lastError: this.lastError } : {}),
      updateTime: this.updateTime,
      ...(this.pluginCaps ? { pluginCapabilities: Object.freeze({ ...this.pluginCaps }) } : {}),
      ...(this.nodeInfo() ? { node: this.nodeInfo() } : {}),
      ...(this.controllerInfo ? { controller: this.controllerInfo } : {}),
    };
    return Object.freeze(info);
  }

  /**
   * Stops fingerprinting and disposes the client. A healthy instance reports
   * itself unhealthy once, so listeners never keep a stopped plugin healthy.
   */
  stop(reason: string): void {
    if (this.isStopped) return;
    this.stopController.abort(new PluginInstanceStoppedError(this.type, this.name, this.allocId, reason));
    this.timer?.dispose();
    this.timer = undefined;
    try {
      this.client.dispose();
    } catch (err) {
      this.log.warn('disposing the CSI client failed', { error: errorMessage(err) });
    }
    if (this.healthy) this.setVerdict(false, `stopped: ${reason}`, undefined);
    this.log.debug('plugin instance stopped', { reason });
  }

  /** Resolves when the round under way (if any) has settled. */
  async settled(): Promise<void> {
    await this.round?.catch(() => undefined);
  }

  dispose(): void {
    this.stop('disposed');
  }

  // ---- internals ------------------------------------------------------------

  private scheduleNext(): void {
    if (this.isStopped) return;
    this.timer = this.deps.clock.setTimeout(() => {
      this.timer = undefined;
      void this.fingerprint().finally(() => this.scheduleNext());
    }, this.deps.heartbeat.fingerprintInterval());
  }

  private nodeInfo(): NodePluginInfo | undefined {
    if (this.type !== 'csi-node' || !this.nodeIdentity || !this.nodeCaps) return undefined;
    const c = this.nodeCaps;
    return Object.freeze({
      ...this.nodeIdentity,
      requiresStaging: c.stageUnstageVolume,
      supportsStats: c.getVolumeStats,
      supportsExpand: c.expandVolume,
      supportsCondition: c.volumeCondition,
      capabilities: Object.freeze({ ...c }),
    });
  }

  private async runRound(): Promise<void> {
    const t = this.deps.timeouts;
    try {
      const probe = await this.bounded('Probe', t.probe(), (o) => this.client.probe(o));
      if (!probe.ready) throw new FingerprintError(`plugin "${this.name}" reports it is not ready (Probe ready=false)`);
      if (!this.pluginCaps) {
        this.pluginCaps = pluginCapabilitiesFrom(
          await this.bounded('GetPluginCapabilities', t.csiCall(), (o) => this.client.getPluginCapabilities(o)),
        );
      }
      if (this.type === 'csi-controller') {
        const c = controllerCapabilitiesFrom(
          await this.bounded('ControllerGetCapabilities', t.csiCall(), (o) => this.client.controllerGetCapabilities(o)),
        );
        this.controllerInfo = Object.freeze({
          supportsAttachDetach: c.publishUnpublishVolume,
          supportsCreateDelete: c.createDeleteVolume,
          supportsExpand: c.expandVolume,
          supportsListVolumes: c.listVolumes,
          supportsGetCapacity: c.getCapacity,
          supportsSnapshots: c.createDeleteSnapshot,
          supportsClone: c.cloneVolume,
          supportsReadOnlyAttach: c.publishReadonly,
          supportsCondition: c.volumeCondition,
          capabilities: Object.freeze({ ...c }),
        });
      } else {
        // A capabilities error ends the round here: node info waits for the next one.
        this.nodeCaps = nodeCapabilitiesFrom(
          await this.bounded('NodeGetCapabilities', t.csiCall(), (o) => this.client.nodeGetCapabilities(o)),
        );
        if (!this.nodeIdentity) {
          const res = await this.bounded('NodeGetInfo', t.csiCall(), (o) => this.client.nodeGetInfo(o));
          if (!res.nodeId)
            throw new FingerprintError(
              `plugin "${this.name}" returned an empty node id from NodeGetInfo; a node plugin must name its node`,
            );
          const max = Number(res.maxVolumesPerNode ?? 0);
          const segments = res.accessibleTopology?.segments;
          this.nodeIdentity = Object.freeze({
            nodeId: res.nodeId,
            // max_volumes_per_node 0 (or absent) means the plugin sets no limit.
            maxVolumes: Number.isFinite(max) && max > 0 ? max : Infinity,
            ...(segments && Object.keys(segments).length > 0 ? { topology: Object.freeze({ ...segments }) } : {}),
          });
        }
      }
      if (this.isStopped) return;
      const first = !this.succeeded;
      const recovered = !first && this.verdict && !this.healthy;
      this.succeeded = true;
      this.setVerdict(true, 'healthy', undefined);
      this.deps.onFingerprinted(this, { first, recovered });
    } catch (err) {
      if (this.isStopped) return;
      const msg = errorMessage(err);
      this.log.warn('fingerprint failed', { error: msg });
      this.setVerdict(false, `fingerprint failed: ${msg}`, msg);
    }
  }

  private setVerdict(healthy: boolean, description: string, lastError: string | undefined): void {
    const previous = this.verdict ? this.healthy : undefined;
    const changed = previous !== healthy;
    const infoChanged = changed || description !== this.description || lastError !== this.lastError;
    this.healthy = healthy;
    this.verdict = true;
    this.description = description;
    if (lastError !== undefined) this.lastError = lastError;
    if (infoChanged) this.updateTime = this.deps.clock.now();
    if (!changed) return;
    if (healthy) this.log.info('plugin became healthy');
    else this.log.warn('plugin became unhealthy', { description });
    this.deps.onHealthChange({
      type: this.type,
      name: this.name,
      allocId: this.allocId,
      healthy,
      previous,
      description,
      ...(this.lastError !== undefined ? { lastError: this.lastError } : {}),
      info: this.info(),
      time: this.updateTime,
    });
  }

  /**
   * Runs one CSI call with a deadline on the injected clock (also handed to
   * the client) that is aborted when the instance stops or `signal` aborts.
   */
  private async bounded<T>(rpc: string, ms: number, call: (o: CSICallOptions) => Promise<T>, signal?: AbortSignal): Promise<T> {
    const ac = new AbortController();
    const stop = this.stopController.signal;
    const onStop = () => ac.abort(stop.reason);
    const onCaller = () => ac.abort(signal!.reason);
    if (stop.aborted) onStop();
    else stop.addEventListener('abort', onStop, { once: true });
    if (signal?.aborted) onCaller();
    else signal?.addEventListener('abort', onCaller, { once: true });
    const timer = this.deps.clock.setTimeout(
      () => ac.abort(new TimeoutError(`${rpc} to plugin "${this.name}" got no answer within ${ms} ms; the plugin may be hung`, ms)),
      ms,
    );
    try {
      return await raceAbort(call({ signal: ac.signal, timeoutMs: ms }), ac.signal);
    } finally {
      timer.dispose();
      stop.removeEventListener('abort', onStop);
      signal?.removeEventListener('abort', onCaller);
    }
  }
}
