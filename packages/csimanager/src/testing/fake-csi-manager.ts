// A CSIManager for the tests of what sits on it (the csi hook, the volume
// catalog, the volume reconciler): plugin instances appear, change health
// and go away when the test says, and each node plugin's volume manager is a
// FakeVolumeManager over one FakeMountTable. Waiting for a plugin behaves
// like DefaultCSIManager's (describeCSIManagerPluginWaitContract runs
// against both): a healthy instance, within the phase's limit from the
// TimeoutPolicy on the injected clock, CSIPluginWaitTimeoutError, the abort
// reason, ShutdownError. Health and ready events fire as the real manager
// fires them, a replaced instance (new alloc or socket) included.
import {
  type Clock,
  DefaultTimeoutPolicy,
  Emitter,
  type PluginWaitPhase,
  ShutdownError,
  type TimeoutPolicy,
  settleOnce,
  toDisposable,
} from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import {
  controllerCapabilitiesFrom,
  nodeCapabilitiesFrom,
  pluginCapabilitiesFrom,
  type ControllerCapabilities,
  type NodeCapabilities,
  type PluginCapabilities,
} from '@csiplug/csi';
import type { CSIManager, CSIPluginType, WaitForCSIPluginOptions } from '../csi-manager';
import { CSIPluginWaitTimeoutError, PluginInstanceNotFoundError } from '../errors';
import type { NodeEvent } from '../node-event';
import type { PluginHealthChange, PluginInfo, PluginReady, PluginRetired } from '../plugin-info';
import type { VolumeManager } from '../volume-manager';
import { FakeMountTable } from './fake-mount-table';
import { FakeVolumeManager } from './fake-volume-manager';

const NODE = 'csi-node';

// Nothing advertised, from the same decoders the real client uses; a node plugin that stages.
const NO_PLUGIN_CAPS: PluginCapabilities = Object.freeze(pluginCapabilitiesFrom(undefined));
const NODE_CAPS: NodeCapabilities = Object.freeze({ ...nodeCapabilitiesFrom(undefined), stageUnstageVolume: true });
const NO_CONTROLLER_CAPS: ControllerCapabilities = Object.freeze(controllerCapabilitiesFrom(undefined));

/**
 * A fingerprinted, healthy instance of (type, name) as DefaultCSIManager
 * reports one: a node plugin that stages, or a controller that creates and
 * deletes volumes. `over` replaces any field.
 */
export function fakePluginInfo(type: CSIPluginType | string, name: string, over: Partial<PluginInfo> = {}): PluginInfo {
  const info: PluginInfo = {
    type,
    name,
    allocId: `alloc-${name}`,
    socketPath: `/fake/plugins/${name}/csi.sock`,
    version: '1.0.0',
    deployment: 'monolith',
    healthy: true,
    fingerprinted: true,
    description: 'healthy',
    updateTime: 0,
    pluginCapabilities: { ...NO_PLUGIN_CAPS, controllerService: true },
    ...(type === NODE
      ? {
          node: {
            nodeId: `node-of-${name}`,
            maxVolumes: Infinity,
            requiresStaging: true,
            supportsStats: false,
            supportsExpand: false,
            supportsCondition: false,
            capabilities: NODE_CAPS,
          },
        }
      : {
          controller: {
            supportsAttachDetach: false,
            supportsCreateDelete: true,
            supportsExpand: false,
            supportsListVolumes: false,
            supportsGetCapacity: false,
            supportsSnapshots: false,
            supportsClone: false,
            supportsReadOnlyAttach: false,
            supportsCondition: false,
            capabilities: { ...NO_CONTROLLER_CAPS, createDeleteVolume: true },
          },
        }),
    ...over,
  };
  return Object.freeze(info);
}

export interface FakeCSIManagerOptions {
  /** Times the waits (default a FakeClock of its own, at `clock`). */
  clock?: Clock;
  /** The phase limits of waitForPlugin (default DefaultTimeoutPolicy's). */
  timeouts?: Pick<TimeoutPolicy, 'pluginWait'>;
  /** The mount table the volume managers change (default a fresh one). */
  mounts?: FakeMountTable;
}

/** One waitForPlugin call, as asked. */
export interface FakePluginWait {
  type: string;
  name: string;
  phase: PluginWaitPhase;
}

interface Waiter {
  readonly type: string;
  readonly name: string;
  wake(info: PluginInfo): void;
  fail(error: Error): void;
}

function keyOf(type: string, name: string): string {
  return `${type}\0${name}`;
}

export class FakeCSIManager implements CSIManager {
  readonly clock: Clock;
  readonly mounts: FakeMountTable;
  /** Node plugin name → its volume manager (made when the plugin first comes up; kept, `down`, while it is gone). */
  readonly managers = new Map<string, FakeVolumeManager>();
  /** Every waitForPlugin call, in order. */
  readonly waits: FakePluginWait[] = [];
  /** Plugin types whose waits fail at once, as after the phase limit (a plugin that never comes up), without moving the clock. */
  readonly unavailable = new Set<string>();
  /** Every health change fired, in order. */
  readonly healthChanges: PluginHealthChange[] = [];
  /** Every ready event fired, in order. */
  readonly readyEvents: PluginReady[] = [];
  private readonly timeouts: Pick<TimeoutPolicy, 'pluginWait'>;
  private readonly infos = new Map<string, PluginInfo>();
  private readonly waiters = new Set<Waiter>();
  private readonly health = new Emitter<PluginHealthChange>();
  private readonly nodeEvents = new Emitter<NodeEvent>();
  private readonly ready = new Emitter<PluginReady>();
  private readonly retiredEvents = new Emitter<PluginRetired>();
  /** The instance last removed under each (type, name): what a new one replaces. */
  private readonly removed = new Map<string, PluginInfo>();
  readonly onDidChangeHealth = this.health.event;
  readonly onDidBecomeReady = this.ready.event;
  readonly onDidRetireInstance = this.retiredEvents.event;
  readonly onNodeEvent = this.nodeEvents.event;
  private shut = false;

  constructor(options: FakeCSIManagerOptions = {}) {
    this.clock = options.clock ?? new FakeClock();
    this.timeouts = options.timeouts ?? new DefaultTimeoutPolicy();
    this.mounts = options.mounts ?? new FakeMountTable();
  }

  /**
   * Sets the instance of (info.type, info.name) as the manager would after a
   * fingerprint: fires a health change when `healthy` is new or differs — an
   * info of another alloc or socket is a new instance, replacing the old one
   * (which reports itself unhealthy, if it was healthy) — then a ready event
   * when a new instance is healthy or an unhealthy one recovered, and wakes
   * the waiters once it is healthy.
   */
  set(info: PluginInfo): void {
    const key = keyOf(info.type, info.name);
    const current = this.infos.get(key);
    const replacing = current !== undefined && (current.allocId !== info.allocId || current.socketPath !== info.socketPath);
    if (replacing && current.healthy)
      this.fireHealth({ ...current, healthy: false, description: `stopped: replaced by alloc ${info.allocId}` }, true);
    const before = replacing ? undefined : current;
    this.infos.set(key, info);
    if (info.type === NODE) this.managerOf(info.name).down = false;
    if (before?.healthy !== info.healthy) this.fireHealth(info, before?.healthy);
    if (info.healthy && !before?.healthy) {
      const predecessor = replacing ? current : before ? undefined : this.removed.get(key);
      this.removed.delete(key);
      const event: PluginReady = {
        info,
        cause: before ? 'recovered' : 'started',
        ...(predecessor ? { replaced: { allocId: predecessor.allocId, socketPath: predecessor.socketPath } } : {}),
        time: this.clock.now(),
      };
      this.readyEvents.push(event);
      this.ready.fire(event);
    }
    if (info.healthy) for (const w of [...this.waiters]) if (w.type === info.type && w.name === info.name) w.wake(info);
  }

  /** Removes the instance of (type, name), as when its plugin's alloc goes away; a healthy one reports itself unhealthy once. */
  remove(type: string, name: string): void {
    const key = keyOf(type, name);
    const before = this.infos.get(key);
    if (!before) return;
    this.infos.delete(key);
    this.removed.set(key, before);
    if (type === NODE) this.managerOf(name).down = true;
    if (before.healthy) this.fireHealth({ ...before, healthy: false, description: 'stopped: plugin removed' }, true);
  }

  /** The alloc `allocId` (with `socketPath`) that the serving instance of (type, name) replaced goes away, as the manager tells it. */
  retire(name: string, allocId: string, socketPath = `/fake/plugins/${allocId}/csi.sock`, type: CSIPluginType | string = NODE): void {
    const info = this.infos.get(keyOf(type, name));
    if (!info) return;
    this.retiredEvents.fire({ info, retired: { allocId, socketPath }, time: this.clock.now() });
  }

  /** A healthy, fingerprinted plugin `name` of `type` comes up (see fakePluginInfo for the fields, `over` for changes). */
  bringUp(name: string, type: CSIPluginType | string = NODE, over: Partial<PluginInfo> = {}): PluginInfo {
    const info = fakePluginInfo(type, name, { updateTime: this.clock.now(), ...over });
    this.set(info);
    return info;
  }

  /** Plugin `name` of `type` goes away (see remove). */
  bringDown(name: string, type: CSIPluginType | string = NODE): void {
    this.remove(type, name);
  }

  /**
   * Plugin `name` of `type` stays registered but fails its fingerprint (its
   * task crashed and is restarting): unhealthy, its volume manager down.
   * bringUp (same alloc) makes it recover.
   */
  crash(name: string, type: CSIPluginType | string = NODE): void {
    const info = this.infos.get(keyOf(type, name));
    if (!info) return;
    this.set({
      ...info,
      healthy: false,
      description: 'fingerprint failed: UNAVAILABLE (injected)',
      lastError: 'UNAVAILABLE (injected)',
      updateTime: this.clock.now(),
    });
    if (type === NODE) this.managerOf(name).down = true;
  }

  /** How many waitForPlugin calls are waiting. */
  get pendingWaits(): number {
    return this.waiters.size;
  }

  async start(): Promise<void> {
    if (this.shut) throw new ShutdownError('the CSI manager is shut down; it cannot start again');
  }

  waitForPlugin(
    type: CSIPluginType | string,
    name: string,
    phase: PluginWaitPhase,
    options: WaitForCSIPluginOptions = {},
  ): Promise<PluginInfo> {
    if (this.shut)
      return Promise.reject(new ShutdownError(`the CSI manager is shut down; cannot wait for plugin "${name}" of type ${type}`));
    this.waits.push({ type, name, phase });
    const phaseLimit = this.timeouts.pluginWait(phase);
    const limit = options.withinMs !== undefined ? Math.max(0, Math.min(phaseLimit, options.withinMs)) : phaseLimit;
    const started = this.clock.now();
    return settleOnce<PluginInfo>(
      (wait) => {
        const now = this.infos.get(keyOf(type, name));
        if (now?.healthy) return wait.resolve(now);
        if (this.unavailable.has(type)) return wait.reject(new CSIPluginWaitTimeoutError(type, name, phase, limit, 'register'));
        const waiter: Waiter = { type, name, wake: (info) => wait.resolve(info), fail: (error) => wait.reject(error) };
        this.waiters.add(waiter);
        wait.own(toDisposable(() => this.waiters.delete(waiter)));
      },
      {
        signal: options.signal,
        deadline: {
          clock: this.clock,
          ms: limit,
          error: () =>
            new CSIPluginWaitTimeoutError(
              type,
              name,
              phase,
              this.clock.now() - started,
              this.infos.has(keyOf(type, name)) ? 'healthy' : 'register',
            ),
        },
      },
    );
  }

  pluginInfo(type: string, name: string): PluginInfo | undefined {
    return this.infos.get(keyOf(type, name));
  }

  plugins(type?: string): PluginInfo[] {
    return [...this.infos.values()]
      .filter((i) => type === undefined || i.type === type)
      .sort((a, b) => (a.type === b.type ? (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) : a.type < b.type ? -1 : 1));
  }

  /** The FakeVolumeManager of node plugin `pluginName`; PluginInstanceNotFoundError while it is not up, like the real manager. */
  volumeManager(pluginName: string): VolumeManager {
    if (this.shut) throw new ShutdownError(`the CSI manager is shut down; no volume manager for plugin "${pluginName}"`);
    if (!this.infos.has(keyOf(NODE, pluginName))) throw new PluginInstanceNotFoundError(NODE, pluginName);
    return this.managerOf(pluginName);
  }

  async dispose(): Promise<void> {
    if (this.shut) return;
    this.shut = true;
    for (const w of [...this.waiters]) w.fail(new ShutdownError('the CSI manager shut down while waiting for a plugin'));
    this.health.dispose();
    this.nodeEvents.dispose();
    this.ready.dispose();
    this.retiredEvents.dispose();
  }

  private managerOf(name: string): FakeVolumeManager {
    let vm = this.managers.get(name);
    if (!vm) this.managers.set(name, (vm = new FakeVolumeManager(name, this.mounts)));
    return vm;
  }

  private fireHealth(info: PluginInfo, previous: boolean | undefined): void {
    const change: PluginHealthChange = {
      type: info.type,
      name: info.name,
      allocId: info.allocId,
      healthy: info.healthy,
      previous,
      description: info.description,
      ...(info.lastError !== undefined ? { lastError: info.lastError } : {}),
      info,
      time: this.clock.now(),
    };
    this.healthChanges.push(change);
    this.health.fire(change);
  }
}
