// The contract of the CSI manager (token ICSIManager): live, fingerprinted
// plugin instances made from the registry's registrations, their health, and
// a volume manager per node plugin.
import type { AsyncDisposable, Event, PluginWaitPhase } from '@csiplug/core';
import type { NodeEvent } from './node-event';
import type { PluginHealthChange, PluginInfo, PluginReady, PluginRetired } from './plugin-info';
import type { VolumeManager } from './volume-manager';

export type CSIPluginType = 'csi-node' | 'csi-controller';

export interface WaitForCSIPluginOptions {
  /** Gives up with the signal's reason (an AbortError by default). */
  signal?: AbortSignal;
  /**
   * Waits at most this long (ms), when less than the phase's limit: what is
   * left of a limit the caller started counting earlier (a mount that waits
   * for its plugin a second time). The timeout error still names the phase.
   */
  withinMs?: number;
}

export interface CSIManager extends AsyncDisposable {
  /** Subscribes to the registry, then resyncs with it (and keeps resyncing on the heartbeat period). Idempotent. */
  start(): Promise<void>;

  /**
   * Waits, within TimeoutPolicy.pluginWait(phase) overall (or `withinMs`),
   * for (type, name) to be registered and then for its instance to be
   * healthy: fingerprinted, and the last round healthy — a plugin that
   * crashed and is still registered is waited for, not handed out.
   * Event-driven. Rejects with CSIPluginWaitTimeoutError (naming type, name,
   * phase and how long), the abort reason, or ShutdownError.
   */
  waitForPlugin(type: CSIPluginType | string, name: string, phase: PluginWaitPhase, options?: WaitForCSIPluginOptions): Promise<PluginInfo>;

  /** The instance of (type, name), if there is one. */
  pluginInfo(type: string, name: string): PluginInfo | undefined;
  /** Every instance (of `type`), sorted by type then name. */
  plugins(type?: string): PluginInfo[];

  /** An instance's healthy flag changed (its first verdict, and a healthy instance stopping, count). */
  readonly onDidChangeHealth: Event<PluginHealthChange>;
  /**
   * A plugin is ready to serve after it was not: a new instance's first
   * healthy round (a plugin started; restarted under a new registration;
   * upgraded — same name, new alloc or socket; or found again after an agent
   * restart), or a healthy round after unhealthy ones. Fired after the
   * health change. What was published through the plugin may need a look.
   */
  readonly onDidBecomeReady: Event<PluginReady>;
  /**
   * The alloc a serving instance replaced went away after the swap (its
   * registration deregistered): what the old process served may be stale
   * from now on, so it needs a look again.
   */
  readonly onDidRetireInstance: Event<PluginRetired>;
  /** A mount or unmount finished, either way. */
  readonly onNodeEvent: Event<NodeEvent>;

  /**
   * The volume manager of node plugin `pluginName`. Throws
   * PluginInstanceNotFoundError (type csi-node) if there is no node
   * instance: waitForPlugin first.
   */
  volumeManager(pluginName: string): VolumeManager;

  /**
   * Stops every instance (closing its client) and unsubscribes; pending
   * waits reject with ShutdownError; resolves once every instance settled.
   * Idempotent.
   */
  dispose(): Promise<void>;
}
