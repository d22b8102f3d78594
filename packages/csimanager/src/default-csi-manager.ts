// DefaultCSIManager: the default ICSIManager. It subscribes to the plugin
// registry before its first resync (so nothing registered in between is
// missed), keeps one serving instance per (type, name) for the active
// registration, resyncs on the heartbeat strategy's period, and hands out
// volume managers (the CSI node steps) that share one per-volume queue.
// A plugin upgrade is create-before-destroy: while the serving instance is
// healthy, a new alloc's registration gets an *incoming* instance beside it,
// and the two swap only at the incoming instance's first healthy round.
import {
  Disposable,
  DisposableStore,
  Emitter,
  Event,
  IClock,
  IHeartbeatStrategy,
  ILogger,
  IMetrics,
  ITimeoutPolicy,
  Logger,
  NullMetrics,
  PluginWaitPhase,
  Settler,
  ShutdownError,
  AbortError,
  errorMessage,
  recordSafely,
  sameStringMap,
  secondsSince,
  settleOnce,
  toDisposable,
} from '@csiplug/core';
import { ICSIClientFactory } from '@csiplug/csi';
import {
  IPluginRegistry,
  PluginEvent,
  PluginTypeCSIController,
  PluginTypeCSINode,
  PluginWaitTimeoutError as RegistryWaitTimeoutError,
  RegisteredPlugin,
} from '@csiplug/registry';
import { inject, injectable } from 'tsyringe';
import type { CSIManager, WaitForCSIPluginOptions } from './csi-manager';
import { CSIVolumeManager } from './csi-volume-manager';
import { CSIPluginWaitTimeoutError, PluginInstanceNotFoundError } from './errors';
import { KeyedMutex } from './keyed-mutex';
import { PLUGIN_WAIT_SECONDS } from './metrics';
import type { NodeEvent } from './node-event';
import type { PluginHealthChange, PluginInfo, PluginReady, PluginRetired } from './plugin-info';
import { PluginInstance } from './plugin-instance';
import { PluginDeployment, pluginMountRoots } from './plugin-options';
import { ICSIManagerConfig, IMountTable } from './tokens';
import type { VolumeManager } from './volume-manager';

/** The registry types the CSI manager runs instances for. */
export const CSI_PLUGIN_TYPES: readonly string[] = Object.freeze([PluginTypeCSIController, PluginTypeCSINode]);

function keyOf(type: string, name: string): string {
  return `${type}\0${name}`;
}

/** Whether `inst` talks to registration `p` as it is now (same alloc, socket, version and options). */
function talksTo(inst: PluginInstance, p: RegisteredPlugin): boolean {
  return (
    inst.allocId === p.allocId &&
    inst.registration.socketPath === p.socketPath &&
    inst.registration.version === p.version &&
    sameStringMap(inst.registration.options, p.options)
  );
}

@injectable()
export class DefaultCSIManager implements CSIManager {
  private readonly log: Logger;
  /** The serving instance of each (type, name): what reads, waits and volume managers see. */
  private readonly instances = new Map<string, PluginInstance>();
  /**
   * A newer registration's instance, started beside a healthy serving one and
   * fingerprinted on its own; it serves from its first healthy round on.
   */
  private readonly incoming = new Map<string, PluginInstance>();
  /**
   * Incoming instances not serving yet, with the last health change each
   * reported: held back from onDidChangeHealth (the plugin's health is the
   * serving instance's) and fired when the instance takes over.
   */
  private readonly heldHealth = new WeakMap<PluginInstance, { change?: PluginHealthChange }>();
  private readonly volumeManagers = new Map<string, CSIVolumeManager>();
  private readonly mutex = new KeyedMutex();
  private readonly subscriptions = new DisposableStore();
  private readonly waiters = new Set<(err: Error) => void>();
  /** The instance each new one replaced (or the last one stopped under its type and name), for its ready event. */
  private readonly predecessors = new WeakMap<PluginInstance, { allocId: string; socketPath: string }>();
  private readonly lastStopped = new Map<string, { allocId: string; socketPath: string }>();
  private resyncTimer: Disposable | undefined;
  private started: Promise<void> | undefined;
  private shut: Promise<void> | undefined;

  private readonly healthEmitter: Emitter<PluginHealthChange>;
  private readonly nodeEventEmitter: Emitter<NodeEvent>;
  private readonly fingerprintEmitter: Emitter<PluginInstance>;
  private readonly readyEmitter: Emitter<PluginReady>;
  private readonly retiredEmitter: Emitter<PluginRetired>;
  private readonly metrics: IMetrics;
  readonly onDidChangeHealth: Event<PluginHealthChange>;
  readonly onDidBecomeReady: Event<PluginReady>;
  readonly onDidRetireInstance: Event<PluginRetired>;
  readonly onNodeEvent: Event<NodeEvent>;

  constructor(
    @inject(IPluginRegistry) private readonly registry: IPluginRegistry,
    @inject(ICSIClientFactory) private readonly clients: ICSIClientFactory,
    @inject(IClock) private readonly clock: IClock,
    @inject(ILogger) logger: ILogger,
    @inject(ITimeoutPolicy) private readonly timeouts: ITimeoutPolicy,
    @inject(IHeartbeatStrategy) private readonly heartbeat: IHeartbeatStrategy,
    @inject(IMountTable) private readonly mountTable: IMountTable,
    @inject(ICSIManagerConfig) private readonly config: ICSIManagerConfig,
    // Optional: a container an embedder built before metrics existed still resolves the manager.
    // No default value in the signature: StrykerJS drops the decorator of a parameter that has one (npm run mutation).
    @inject(IMetrics, { isOptional: true }) metrics?: IMetrics,
  ) {
    this.metrics = metrics ?? new NullMetrics();
    this.log = logger.child({ component: 'csi-manager' });
    const onListenerError = (err: unknown) =>
      this.log.error('a CSI manager event listener threw; the other listeners still ran', { error: errorMessage(err) });
    this.healthEmitter = new Emitter({ onListenerError });
    this.nodeEventEmitter = new Emitter({ onListenerError });
    this.fingerprintEmitter = new Emitter({ onListenerError });
    this.readyEmitter = new Emitter({ onListenerError });
    this.retiredEmitter = new Emitter({ onListenerError });
    this.onDidRetireInstance = this.retiredEmitter.event;
    this.onDidChangeHealth = this.healthEmitter.event;
    this.onDidBecomeReady = this.readyEmitter.event;
    this.onNodeEvent = this.nodeEventEmitter.event;
  }

  // ---- lifecycle ------------------------------------------------------------

  start(): Promise<void> {
    if (this.shut) return Promise.reject(new ShutdownError('the CSI manager is shut down; it cannot start again'));
    this.started ??= this.doStart();
    return this.started;
  }

  private async doStart(): Promise<void> {
    // Subscribe first, then resync: a registration made between the two is
    // seen by the resync or by the event, never by neither.
    this.subscriptions.add(this.registry.onDidChange((e) => this.onRegistryEvent(e)));
    for (const type of CSI_PLUGIN_TYPES) {
      try {
        this.subscriptions.add(this.registry.registerDispenser(type, (p) => this.clients.createClient(p.socketPath)));
      } catch (err) {
        // A deployment bound its own dispenser for this type: keep it.
        this.log.info('a plugin dispenser is registered already; keeping it', { type, error: errorMessage(err) });
      }
    }
    this.resync();
    if (this.config.resync !== false) this.scheduleResync();
    this.log.info('CSI manager started', { plugins: this.instances.size, resync: this.config.resync !== false });
  }

  dispose(): Promise<void> {
    this.shut ??= this.doDispose();
    return this.shut;
  }

  private async doDispose(): Promise<void> {
    this.subscriptions.dispose();
    this.resyncTimer?.dispose();
    this.resyncTimer = undefined;
    for (const reject of [...this.waiters]) reject(new ShutdownError('the CSI manager shut down while waiting for a plugin'));
    const all = [...this.instances.values(), ...this.incoming.values()];
    this.instances.clear();
    this.incoming.clear();
    for (const inst of all) inst.stop('the CSI manager shut down');
    await Promise.all(all.map((i) => i.settled()));
    this.healthEmitter.dispose();
    this.nodeEventEmitter.dispose();
    this.fingerprintEmitter.dispose();
    this.readyEmitter.dispose();
    this.retiredEmitter.dispose();
    this.log.info('CSI manager shut down', { stopped: all.length });
  }

  // ---- reads ----------------------------------------------------------------

  pluginInfo(type: string, name: string): PluginInfo | undefined {
    return this.instances.get(keyOf(type, name))?.info();
  }

  plugins(type?: string): PluginInfo[] {
    return [...this.instances.values()]
      .filter((i) => type === undefined || i.type === type)
      .sort((a, b) => (a.type === b.type ? (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) : a.type < b.type ? -1 : 1))
      .map((i) => i.info());
  }

  /** @internal The serving instance of (type, name), for tests and benchmarks. */
  instanceOf(type: string, name: string): PluginInstance | undefined {
    return this.instances.get(keyOf(type, name));
  }

  /** @internal The incoming instance of (type, name) (a newer registration not serving yet), for tests. */
  incomingOf(type: string, name: string): PluginInstance | undefined {
    return this.incoming.get(keyOf(type, name));
  }

  /** Runs a fingerprint round on every instance (serving and incoming) now; resolves when all have settled. */
  async fingerprintAll(): Promise<void> {
    await Promise.all([...this.instances.values(), ...this.incoming.values()].map((i) => i.fingerprint()));
  }

  volumeManager(pluginName: string): VolumeManager {
    if (this.shut) throw new ShutdownError(`the CSI manager is shut down; no volume manager for plugin "${pluginName}"`);
    if (!this.instances.has(keyOf(PluginTypeCSINode, pluginName))) throw new PluginInstanceNotFoundError(PluginTypeCSINode, pluginName);
    let vm = this.volumeManagers.get(pluginName);
    if (!vm) {
      vm = new CSIVolumeManager(pluginName, {
        dataDir: this.config.dataDir,
        instance: () => {
          const inst = this.instances.get(keyOf(PluginTypeCSINode, pluginName));
          if (!inst) throw new PluginInstanceNotFoundError(PluginTypeCSINode, pluginName);
          return inst;
        },
        mutex: this.mutex,
        mountTable: this.mountTable,
        clock: this.clock,
        logger: this.log,
        metrics: this.metrics,
        emit: (e) => this.nodeEventEmitter.fire(e),
      });
      this.volumeManagers.set(pluginName, vm);
    }
    return vm;
  }

  // ---- waiting --------------------------------------------------------------

  async waitForPlugin(type: string, name: string, phase: PluginWaitPhase, options: WaitForCSIPluginOptions = {}): Promise<PluginInfo> {
    if (this.shut) throw new ShutdownError(`the CSI manager is shut down; cannot wait for plugin "${name}" of type ${type}`);
    const phaseLimit = this.timeouts.pluginWait(phase);
    const limit = options.withinMs !== undefined ? Math.max(0, Math.min(phaseLimit, options.withinMs)) : phaseLimit;
    const started = this.clock.now();
    const waited = this.settleWait(type, name, phase, started, limit, options.signal);
    const record = (result: string) =>
      recordSafely(() => this.metrics.observe(PLUGIN_WAIT_SECONDS, secondsSince(started, this.clock.now()), { type, phase, result }));
    waited.then(
      () => record('ready'),
      (err: unknown) =>
        record(
          err instanceof CSIPluginWaitTimeoutError
            ? 'timeout'
            : err instanceof AbortError || (err instanceof Error && err.name === 'AbortError')
              ? 'aborted'
              : 'error',
        ),
    );
    return waited;
  }

  private settleWait(
    type: string,
    name: string,
    phase: PluginWaitPhase,
    started: number,
    limit: number,
    signal: AbortSignal | undefined,
  ): Promise<PluginInfo> {
    // One wait over both stages (registered, then fingerprinted), so that
    // dispose() and the caller's signal end it in either: the registry
    // outlives the manager, and its wait alone would stay pending.
    return settleOnce<PluginInfo>(
      (wait) => {
        const onDispose = (error: Error) => wait.reject(error);
        this.waiters.add(onDispose);
        wait.own(toDisposable(() => this.waiters.delete(onDispose)));
        const registryWait = new AbortController();
        wait.own(toDisposable(() => registryWait.abort()));
        this.registry.waitForPlugin(type, name, { timeout: limit, signal: registryWait.signal }).then(
          () => this.awaitFingerprint(wait, type, name, phase, started, limit),
          (err: unknown) =>
            wait.reject(
              err instanceof RegistryWaitTimeoutError
                ? new CSIPluginWaitTimeoutError(type, name, phase, this.clock.now() - started, 'register', { cause: err })
                : err,
            ),
        );
      },
      { signal },
    );
  }

  /**
   * The second stage of a plugin wait: settles `wait` once the instance of
   * (type, name) is healthy (a successful fingerprint, the last round
   * healthy); woken by fingerprints, bounded by what is left of the limit.
   */
  private awaitFingerprint(
    wait: Settler<PluginInfo>,
    type: string,
    name: string,
    phase: PluginWaitPhase,
    started: number,
    limit: number,
  ): void {
    if (wait.settled) return;
    const ready = () => {
      const inst = this.instances.get(keyOf(type, name));
      return inst?.hasFingerprinted && inst.isHealthy ? inst.info() : undefined;
    };
    const now = ready();
    if (now) return wait.resolve(now);
    wait.own(
      this.fingerprintEmitter.event((inst) => {
        if (inst.type !== type || inst.name !== name) return;
        const info = ready();
        if (info) wait.resolve(info);
      }),
    );
    const remaining = Math.max(0, limit - (this.clock.now() - started));
    if (Number.isFinite(remaining)) {
      wait.own(
        this.clock.setTimeout(() => {
          const inst = this.instances.get(keyOf(type, name));
          const last = inst?.info().lastError;
          const stage = inst?.hasFingerprinted ? 'healthy' : 'fingerprint';
          wait.reject(
            new CSIPluginWaitTimeoutError(
              type,
              name,
              phase,
              this.clock.now() - started,
              stage,
              last !== undefined ? { lastError: last } : {},
            ),
          );
        }, remaining),
      );
    }
  }

  // ---- instances ------------------------------------------------------------

  private onRegistryEvent(e: PluginEvent): void {
    if (this.shut || !CSI_PLUGIN_TYPES.includes(e.plugin.type)) return;
    if (e.kind === 'registered') {
      if (e.active) this.ensureInstance(e.plugin, true);
      else this.followServing(e.plugin);
      return;
    }
    // Only an instance of the alloc that went away stops; a `promoted`
    // registration, if any, follows and starts the next one.
    const key = keyOf(e.plugin.type, e.plugin.name);
    const next = this.incoming.get(key);
    if (next && next.allocId === e.plugin.allocId) this.dropIncoming(next, `alloc ${e.plugin.allocId} deregistered before it was ready`);
    const inst = this.instances.get(key);
    if (inst && inst.allocId !== e.plugin.allocId) {
      // The alloc the serving instance replaced went away after the swap: what its process served may be stale now.
      const predecessor = this.predecessors.get(inst);
      if (predecessor?.allocId === e.plugin.allocId) {
        this.predecessors.delete(inst);
        this.log.info('the alloc a serving plugin instance replaced went away', {
          type: inst.type,
          name: inst.name,
          allocId: inst.allocId,
          retired: predecessor.allocId,
        });
        this.retiredEmitter.fire({ info: inst.info(), retired: predecessor, time: this.clock.now() });
      }
      return;
    }
    if (!inst) return;
    // The serving alloc went away while a newer one was getting ready: that
    // one serves now, ready or not (there is nothing else to serve).
    const waiting = this.incoming.get(key);
    if (waiting) this.takeOver(waiting, inst, `alloc ${inst.allocId} deregistered; alloc ${waiting.allocId} serves now`);
    else this.removeInstance(inst, `alloc ${e.plugin.allocId} deregistered`);
  }

  /** Makes the instances match the registry's active entries. */
  private resync(): void {
    if (this.shut) return;
    for (const type of CSI_PLUGIN_TYPES) {
      if (!this.registry.types.includes(type)) continue;
      const active = this.registry.list(type);
      const names = new Set(active.map((p) => p.name));
      for (const p of active) {
        this.ensureInstance(p, false);
        // A serving instance kept beside an incoming one follows its own
        // alloc's registration, which is not the active one.
        const serving = this.instances.get(keyOf(type, p.name));
        if (serving && this.incoming.has(keyOf(type, p.name))) {
          const own = this.registry.registrations(type, p.name).find((r) => r.allocId === serving.allocId);
          if (own) this.followServing(own);
        }
      }
      for (const inst of [...this.incoming.values()]) {
        if (inst.type === type && !names.has(inst.name)) this.dropIncoming(inst, 'no longer registered (resync)');
      }
      for (const inst of [...this.instances.values()]) {
        if (inst.type === type && !names.has(inst.name)) this.removeInstance(inst, 'no longer registered (resync)');
      }
    }
  }

  private scheduleResync(): void {
    if (this.shut) return;
    this.resyncTimer = this.clock.setTimeout(() => {
      this.resyncTimer = undefined;
      try {
        this.resync();
      } catch (err) {
        this.log.error('resync with the plugin registry failed; retrying on the next period', { error: errorMessage(err) });
      }
      this.scheduleResync();
    }, this.heartbeat.fingerprintInterval());
  }

  /**
   * Makes (type, name) follow its active registration `p`: keeps an instance
   * that talks to it already; starts an incoming instance for it beside a
   * serving one that is healthy and still registered (create-before-destroy:
   * an upgrade); otherwise replaces the serving instance at once. `news`: a
   * registry event (not a resync), worth a fingerprint round now.
   */
  private ensureInstance(p: RegisteredPlugin, news: boolean): void {
    const key = keyOf(p.type, p.name);
    const current = this.instances.get(key);
    const waiting = this.incoming.get(key);
    if (current && talksTo(current, p)) {
      // The serving alloc is the active one again (a newer one went away).
      if (waiting) this.dropIncoming(waiting, `alloc ${p.allocId} is the active registration again`);
      // The same plugin announced itself again (after an agent restart its
      // restored entry is `confirmed`): if it is not healthy yet, look now
      // rather than at the next periodic round, so restoring allocs that
      // wait on it go on at once.
      if (!current.isHealthy) void current.fingerprintAfterNews();
      return;
    }
    if (waiting && talksTo(waiting, p)) {
      if (news) void waiting.fingerprintAfterNews();
      return;
    }
    const keepServing = current !== undefined && this.servesUntilReplaced(current, p);
    const inst = this.makeInstance(p);
    if (!inst) {
      if (waiting) this.dropIncoming(waiting, `replaced by alloc ${p.allocId}, whose client could not be created`);
      if (current && !keepServing) this.removeInstance(current, `replaced by alloc ${p.allocId}, whose client could not be created`);
      return;
    }
    if (keepServing) {
      if (waiting) this.dropIncoming(waiting, `replaced by alloc ${p.allocId}, a newer registration, before it was ready`);
      this.incoming.set(key, inst);
      this.heldHealth.set(inst, {});
      this.log.info('plugin instance started beside the serving one; it serves from its first healthy fingerprint', {
        type: p.type,
        name: p.name,
        allocId: p.allocId,
        socketPath: p.socketPath,
        serving: current!.allocId,
        replacedIncoming: waiting?.allocId,
      });
      inst.start();
      return;
    }
    if (waiting) this.dropIncoming(waiting, `replaced by alloc ${p.allocId}`);
    if (current) this.removeInstance(current, `replaced by alloc ${p.allocId}`);
    const predecessor = current ? { allocId: current.allocId, socketPath: current.registration.socketPath } : this.lastStopped.get(key);
    if (predecessor) this.predecessors.set(inst, predecessor);
    this.lastStopped.delete(key);
    this.instances.set(key, inst);
    this.log.info('plugin instance started', {
      type: p.type,
      name: p.name,
      allocId: p.allocId,
      socketPath: p.socketPath,
      restored: p.restored,
      replaced: current?.allocId,
    });
    inst.start();
  }

  /**
   * Whether `current` keeps serving while an instance for `next` gets ready:
   * `next` is another alloc (the same alloc's new registration means its
   * task restarted: the old process is gone), and `current` is healthy and
   * still registered. A crashed plugin, or one not fingerprinted yet (after
   * an agent restart), is replaced at once: there is nothing to keep.
   */
  private servesUntilReplaced(current: PluginInstance, next: RegisteredPlugin): boolean {
    if (current.allocId === next.allocId || current.isStopped || !current.isHealthy) return false;
    return this.registry.registrations(current.type, current.name).some((r) => talksTo(current, r));
  }

  /**
   * An inactive registration changed: if it is the serving instance's own
   * (kept beside an incoming one) with new info, its task restarted, and
   * the serving instance follows it at once; the incoming one stays.
   */
  private followServing(p: RegisteredPlugin): void {
    const key = keyOf(p.type, p.name);
    const current = this.instances.get(key);
    if (!current || current.allocId !== p.allocId || talksTo(current, p)) return;
    const inst = this.makeInstance(p);
    this.removeInstance(
      current,
      inst ? `alloc ${p.allocId} re-registered with new info` : `alloc ${p.allocId} re-registered, and its client could not be created`,
    );
    if (!inst) return;
    this.predecessors.set(inst, { allocId: current.allocId, socketPath: current.registration.socketPath });
    this.lastStopped.delete(key);
    this.instances.set(key, inst);
    this.log.info('plugin instance started', {
      type: p.type,
      name: p.name,
      allocId: p.allocId,
      socketPath: p.socketPath,
      replaced: current.allocId,
      incoming: this.incoming.get(key)?.allocId,
    });
    inst.start();
  }

  /** A new, not yet started instance for `p`, or undefined (logged) when its client cannot be created. */
  private makeInstance(p: RegisteredPlugin): PluginInstance | undefined {
    let deployment: PluginDeployment;
    try {
      deployment = pluginMountRoots(p, this.config.dataDir).deployment;
    } catch (err) {
      this.log.error('plugin registration has unusable mount options; volumes cannot be mounted through it until it re-registers', {
        type: p.type,
        name: p.name,
        allocId: p.allocId,
        error: errorMessage(err),
      });
      deployment = p.type === PluginTypeCSIController ? 'controller' : 'node';
    }
    let client;
    try {
      client = this.clients.createClient(p.socketPath);
    } catch (err) {
      this.log.error('could not create a CSI client for a registration; no instance for it', {
        type: p.type,
        name: p.name,
        allocId: p.allocId,
        socketPath: p.socketPath,
        error: errorMessage(err),
      });
      return undefined;
    }
    const inst: PluginInstance = new PluginInstance(p, deployment, client, {
      clock: this.clock,
      logger: this.log,
      timeouts: this.timeouts,
      heartbeat: this.heartbeat,
      onHealthChange: (change) => this.onInstanceHealth(inst, change),
      onFingerprinted: (i, round) => this.onFingerprinted(i, round),
    });
    return inst;
  }

  private removeInstance(inst: PluginInstance, reason: string): void {
    const key = keyOf(inst.type, inst.name);
    if (this.instances.get(key) === inst) {
      this.instances.delete(key);
      this.lastStopped.set(key, { allocId: inst.allocId, socketPath: inst.registration.socketPath });
    }
    inst.stop(reason);
    this.log.info('plugin instance stopped', { type: inst.type, name: inst.name, allocId: inst.allocId, reason });
  }

  /** Stops an incoming instance that will not serve. */
  private dropIncoming(inst: PluginInstance, reason: string): void {
    const key = keyOf(inst.type, inst.name);
    if (this.incoming.get(key) === inst) this.incoming.delete(key);
    inst.stop(reason);
    this.log.info('incoming plugin instance stopped before it served', { type: inst.type, name: inst.name, allocId: inst.allocId, reason });
  }

  /**
   * The incoming instance `next` serves from now on, in one step: it
   * becomes the instance of (type, name) before the one it replaces stops
   * (so a listener of that stop reads the new one), then the health it
   * reported while incoming is told.
   */
  private takeOver(next: PluginInstance, previous: PluginInstance | undefined, reason: string): void {
    const key = keyOf(next.type, next.name);
    if (this.incoming.get(key) === next) this.incoming.delete(key);
    const held = this.heldHealth.get(next);
    this.heldHealth.delete(next);
    this.instances.set(key, next);
    this.lastStopped.delete(key);
    if (previous) {
      this.predecessors.set(next, { allocId: previous.allocId, socketPath: previous.registration.socketPath });
      previous.stop(reason);
      this.log.info('plugin instance stopped', { type: previous.type, name: previous.name, allocId: previous.allocId, reason });
    }
    this.log.info('plugin instance serves now', {
      type: next.type,
      name: next.name,
      allocId: next.allocId,
      socketPath: next.registration.socketPath,
      healthy: next.isHealthy,
      replaced: previous?.allocId,
    });
    // Its first verdict as far as listeners know: they never heard the held ones.
    if (held?.change) this.healthEmitter.fire({ ...held.change, previous: undefined });
  }

  private onInstanceHealth(inst: PluginInstance, change: PluginHealthChange): void {
    const held = this.heldHealth.get(inst);
    if (!held) {
      this.healthEmitter.fire(change);
      return;
    }
    held.change = change;
    // Told once: an incoming instance's verdict changes only when it turns healthy, and then it serves.
    if (!change.healthy) {
      const serving = this.instances.get(keyOf(inst.type, inst.name));
      this.log.warn(
        'a new registration of the plugin is not healthy yet; the serving instance goes on serving until it is, or until one of them deregisters',
        {
          type: inst.type,
          name: inst.name,
          allocId: inst.allocId,
          serving: serving?.allocId,
          description: change.description,
        },
      );
    }
  }

  private onFingerprinted(inst: PluginInstance, { first, recovered }: { first: boolean; recovered: boolean }): void {
    const key = keyOf(inst.type, inst.name);
    // An incoming instance's first healthy round: it serves from now on.
    if (this.incoming.get(key) === inst) this.takeOver(inst, this.instances.get(key), `replaced by alloc ${inst.allocId}, which is ready`);
    // A stale instance (replaced while its round ran) says nothing about the current one.
    if (this.instances.get(key) !== inst) return;
    if (first) {
      try {
        this.registry.confirmAlive(inst.type, inst.name, inst.allocId);
      } catch (err) {
        this.log.warn('could not confirm a restored plugin alive in the registry', {
          type: inst.type,
          name: inst.name,
          error: errorMessage(err),
        });
      }
    }
    this.fingerprintEmitter.fire(inst);
    if (first || recovered) {
      const replaced = this.predecessors.get(inst);
      this.readyEmitter.fire({
        info: inst.info(),
        cause: first ? 'started' : 'recovered',
        ...(replaced ? { replaced } : {}),
        time: this.clock.now(),
      });
    }
  }
}
