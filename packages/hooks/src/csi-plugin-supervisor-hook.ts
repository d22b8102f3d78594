// csi_plugin_supervisor: the task hook of a task with a `csi_plugin` block.
//
// prestart  makes the socket dir and the staging/publish base dir (0700) and
//           points the task at its socket (CSI_ENDPOINT).
// poststart waits for the socket (a filesystem watch), probes as the
//           HeartbeatStrategy says until healthy or the health timeout, then
//           registers one entry (node or controller) or two (monolith), and
//           keeps probing on the steady period, reporting changes as events.
// stop/exited deregisters every entry it registered and removes the socket dir.
//
// On a restore the task is already running: the same path re-probes and
// re-registers, and the registry keeps the alloc's place in its list.
//
// A plugin that is not healthy within its health timeout (or cannot be
// registered) has its task restarted through ctx.requestRestart, which the
// task runner counts against the task's restart policy like a failed exit:
// with `restart { attempts = 1, mode = "fail" }` it is restarted once, then
// the task is dead and failed, the event saying why.
//
// A plugin task that exits and is restarted by its policy "goes and comes
// back": `exited` deregisters it, and the restarted task registers again once
// it is healthy. Nomad keeps the registration and marks it unhealthy instead;
// we do not, because:
//   - a registration here means "this socket answered its probes": nothing
//     is ever dispatched to a plugin that is known to be down (its socket is
//     gone with the process), and a waiter needs no second signal to tell a
//     registered plugin from a usable one;
//   - the registry promotes the newest registration of a name: a dead plugin
//     that stayed registered would keep that place, or shadow another alloc of
//     the same plugin (an update that runs the new one beside the old);
//   - the restart may never come (policy used up, mode "fail"): then nothing
//     stale is left behind to deregister.
// Whoever needs the plugin waits for its registration as a *healthy* plugin
// (the CSI manager's plugin wait, the volume reconciler's retries on
// `healthy`), so a short crash-restart delays a prerun or an unmount rather
// than failing it.
import {
  Clock,
  Disposable,
  HeartbeatStrategy,
  IClock,
  IHeartbeatStrategy,
  ILogger,
  ITimeoutPolicy,
  Logger,
  TimeoutError,
  TimeoutPolicy,
  errorMessage,
  formatDuration,
} from '@csiplug/core';
import { CSIClient, ICSIClientFactory, type CSIClientFactory } from '@csiplug/csi';
import { PLUGIN_OPTION_CONTAINER_MOUNT_POINT, PLUGIN_OPTION_PLUGIN_TYPE, PLUGIN_OPTION_STAGE_PUBLISH_BASE } from '@csiplug/csimanager';
import { IPluginRegistry, PluginTypeCSIController, PluginTypeCSINode, type PluginRegistry } from '@csiplug/registry';
import * as fs from 'fs';
import * as path from 'path';
import { inject, injectable } from 'tsyringe';
import type { CSIPluginConfig, TaskHook, TaskHookContext, TaskPrestartResult } from './hook';
import { CSI_SOCKET_NAME, pluginMountRoot, pluginSocketDir, pluginSocketPath } from './paths';
import { SharedMountError, ensureSharedMount, propagationProblem, releaseSharedMount } from './shared-mount';
import { IHooksConfig, type HooksConfig } from './hooks-config';
import type { ICSIPluginSupervisorFactory } from './tokens';
import { waitForPath } from './wait-for-path';

export const TASK_EVENT_PLUGIN_HEALTHY = 'Plugin became healthy';
export const TASK_EVENT_PLUGIN_UNHEALTHY = 'Plugin became unhealthy';

/** The plugin's vendor name (GetPluginInfo), kept with its registration. */
export const REGISTRATION_OPTION_PROVIDER = 'provider';

/** The registry types a `csi_plugin` block's type registers as. */
export function registryTypesFor(kind: CSIPluginConfig['type']): string[] {
  switch (kind) {
    case 'controller':
      return [PluginTypeCSIController];
    case 'node':
      return [PluginTypeCSINode];
    case 'monolith':
      return [PluginTypeCSIController, PluginTypeCSINode];
  }
}

export class CSIPluginSupervisorHook implements TaskHook {
  readonly name = 'csi_plugin_supervisor';

  private client: CSIClient | undefined;
  /** What this task registered, each entry bound to its own type and name. */
  private registered: { type: string; name: string; allocId: string }[] = [];
  private loop: AbortController | undefined;
  private steadyTimer: Disposable | undefined;
  private healthy = false;

  constructor(
    private readonly config: CSIPluginConfig,
    private readonly dataDir: string,
    private readonly registry: PluginRegistry,
    private readonly clients: CSIClientFactory,
    private readonly clock: Clock,
    private readonly heartbeat: HeartbeatStrategy,
    private readonly timeouts: TimeoutPolicy,
    private readonly logger: Logger,
    /** Per mount root, the isolated plugin tasks of this agent that use its shared bind (shared by every hook the factory makes). */
    private readonly mountRootUsers: Map<string, Set<CSIPluginSupervisorHook>> = new Map(),
  ) {}

  /** Entries currently registered by this task (for status and tests). */
  get registrations(): readonly { type: string; name: string }[] {
    return this.registered.map(({ type, name }) => ({ type, name }));
  }

  get isHealthy(): boolean {
    return this.healthy;
  }

  async prestart(ctx: TaskHookContext): Promise<TaskPrestartResult> {
    const socketDir = pluginSocketDir(this.dataDir, ctx.alloc.id);
    const mountRoot = pluginMountRoot(this.dataDir, this.config);
    for (const dir of [socketDir, mountRoot]) {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      fs.chmodSync(dir, 0o700);
    }
    if (ctx.task.isolated) {
      // An isolated plugin sees its socket dir at mount_dir and the
      // staging/publish base at stage_publish_base_dir, the latter with
      // bidirectional propagation: what it mounts there appears on the host
      // (and so in the workloads). The host side must be a shared mount for
      // that; it is made one here.
      ensureSharedMount(mountRoot);
      this.useMountRoot(mountRoot);
      const env: Record<string, string> = { CSIPLUG_CSI_MOUNT_DIR: this.config.stagePublishBaseDir };
      if (!ctx.task.env.CSI_ENDPOINT) env.CSI_ENDPOINT = `unix://${path.posix.join(this.config.mountDir, CSI_SOCKET_NAME)}`;
      return {
        env,
        mounts: [
          { source: socketDir, destination: this.config.mountDir },
          { source: mountRoot, destination: this.config.stagePublishBaseDir, propagation: 'bidirectional' },
        ],
      };
    }
    const env: Record<string, string> = { CSIPLUG_CSI_MOUNT_DIR: mountRoot };
    if (!ctx.task.env.CSI_ENDPOINT) env.CSI_ENDPOINT = `unix://${pluginSocketPath(this.dataDir, ctx.alloc.id)}`;
    return { env };
  }

  async poststart(ctx: TaskHookContext): Promise<void> {
    this.stopLoop();
    const loop = new AbortController();
    this.loop = loop;
    const onOuterAbort = () => loop.abort(ctx.signal.reason);
    ctx.signal.addEventListener('abort', onOuterAbort, { once: true });
    try {
      await this.startUp(ctx, loop.signal);
    } finally {
      ctx.signal.removeEventListener('abort', onOuterAbort);
    }
  }

  async stop(ctx: TaskHookContext): Promise<void> {
    this.teardown(ctx);
    if (ctx.task.isolated) this.releaseMountRoot(ctx);
  }

  private useMountRoot(mountRoot: string): void {
    let users = this.mountRootUsers.get(mountRoot);
    if (!users) this.mountRootUsers.set(mountRoot, (users = new Set()));
    users.add(this);
  }

  /**
   * An isolated plugin is registered only when its staging/publish mount is
   * shared on both sides: else every volume it mounts would stay hidden in
   * its container while the workloads see empty dirs. Refused with a
   * SharedMountError that says which side is not.
   */
  private async checkPropagation(ctx: TaskHookContext): Promise<void> {
    const mountRoot = pluginMountRoot(this.dataDir, this.config);
    const inTask = await ctx.taskMountInfo?.();
    if (inTask === undefined)
      throw new SharedMountError(
        mountRoot,
        "the mount table of the plugin's container could not be read, so its propagation cannot be checked",
      );
    const problem = propagationProblem(fs.realpathSync(mountRoot), this.config.stagePublishBaseDir, inTask);
    if (problem) throw new SharedMountError(mountRoot, problem);
  }

  /**
   * The task exited or stopped: the shared bind of the staging/publish base
   * its prestart made goes (its next start makes it again), unless another alloc of the plugin is registered
   * (an upgrade's new alloc needs it) or something is still mounted below
   * (volumes left staged or published: it goes with a later stop).
   */
  private releaseMountRoot(ctx: TaskHookContext): void {
    const mountRoot = pluginMountRoot(this.dataDir, this.config);
    const users = this.mountRootUsers.get(mountRoot);
    users?.delete(this);
    if (users && users.size === 0) this.mountRootUsers.delete(mountRoot);
    try {
      // Another isolated task of the plugin runs on it (an upgrade's new alloc, registered or not yet), or one an earlier agent started is registered.
      if (users && users.size > 0) return;
      const others = registryTypesFor(this.config.type).some((type) =>
        this.registry.registrations(type, this.config.id).some((r) => r.allocId !== ctx.alloc.id),
      );
      if (!others) releaseSharedMount(mountRoot);
    } catch (err) {
      this.logger.warn(
        'could not release the shared mount of the plugin staging/publish base; it stays (harmless: made shared again by the next isolated plugin task)',
        { alloc_id: ctx.alloc.id, path: mountRoot, error: err },
      );
    }
  }

  async exited(ctx: TaskHookContext): Promise<void> {
    this.teardown(ctx);
    // Its container is gone: it no longer uses the shared bind (a restart's prestart takes it again).
    if (ctx.task.isolated) this.releaseMountRoot(ctx);
  }

  /** The agent goes away, the task runs on: stop probing and dispose the client; the registrations stay for the next agent. */
  detach(): void {
    this.stopLoop();
    this.client?.dispose();
    this.client = undefined;
  }

  private async startUp(ctx: TaskHookContext, signal: AbortSignal): Promise<void> {
    const id = this.config.id;
    const log = this.logger.child({ alloc_id: ctx.alloc.id, task: ctx.task.name, plugin_id: id });
    const socket = pluginSocketPath(this.dataDir, ctx.alloc.id);
    const limit = this.config.healthTimeout;
    const deadline = this.clock.now() + limit;
    const unhealthy = (why: string) => {
      if (signal.aborted) return;
      ctx.emitEvent({ type: TASK_EVENT_PLUGIN_UNHEALTHY, message: `plugin: ${id}: ${why}` });
      log.warn('CSI plugin did not become healthy; restarting its task', { reason: why });
      ctx.requestRestart(`plugin ${id} did not become healthy within ${formatDuration(limit)}: ${why}`);
    };

    try {
      await waitForPath(socket, { clock: this.clock, timeoutMs: limit, signal, logger: log });
    } catch (err) {
      if (signal.aborted) return;
      unhealthy(err instanceof TimeoutError ? `socket ${socket} did not appear within ${formatDuration(limit)}` : errorMessage(err));
      return;
    }

    this.client?.dispose();
    const client = this.clients.createClient(`unix://${socket}`);
    this.client = client;

    let lastProblem = 'no probe answered';
    for (let attempt = 0; ; attempt++) {
      const remaining = deadline - this.clock.now();
      if (remaining <= 0) return unhealthy(`not healthy within ${formatDuration(limit)} (last: ${lastProblem})`);
      const delay = Math.min(this.heartbeat.startupProbeDelay(attempt), remaining);
      try {
        if (delay > 0) await this.clock.sleep(delay, signal);
      } catch {
        return; // stopped while waiting
      }
      if (this.clock.now() >= deadline) return unhealthy(`not healthy within ${formatDuration(limit)} (last: ${lastProblem})`);
      const probe = await this.probeOnce(client, signal, Math.min(this.timeouts.probe(), Math.max(1, deadline - this.clock.now())));
      if (signal.aborted) return;
      if (probe.healthy) break;
      lastProblem = probe.problem;
      log.debug('CSI plugin not ready yet', { attempt, problem: probe.problem });
    }

    this.healthy = true;
    ctx.emitEvent({ type: TASK_EVENT_PLUGIN_HEALTHY, message: `plugin: ${id}` });

    try {
      await this.registerAll(ctx, client, signal);
    } catch (err) {
      if (signal.aborted) return;
      const why = errorMessage(err);
      log.error('CSI plugin registration failed; rolled back and restarting its task', { error: err });
      ctx.emitEvent({ type: TASK_EVENT_PLUGIN_UNHEALTHY, message: `failed to register plugin: ${id}, reason: ${why}` });
      ctx.requestRestart(`plugin ${id} could not be registered: ${why}`);
      return;
    }
    this.scheduleSteadyProbe(ctx, client, signal);
  }

  private async registerAll(ctx: TaskHookContext, client: CSIClient, signal: AbortSignal): Promise<void> {
    if (ctx.task.isolated) {
      // A task re-attached after an agent restart ran no prestart in this agent: it uses the shared bind all the same.
      this.useMountRoot(pluginMountRoot(this.dataDir, this.config));
      await this.checkPropagation(ctx);
    }
    const info = await client.getPluginInfo({ signal });
    const mountRoot = pluginMountRoot(this.dataDir, this.config);
    const socketPath = pluginSocketPath(this.dataDir, ctx.alloc.id);
    const done: { type: string; name: string; allocId: string }[] = [];
    try {
      for (const type of registryTypesFor(this.config.type)) {
        if (signal.aborted) throw signal.reason;
        this.registry.register({
          type,
          name: this.config.id,
          version: info.vendorVersion ?? '',
          allocId: ctx.alloc.id,
          socketPath,
          options: {
            [REGISTRATION_OPTION_PROVIDER]: info.name ?? '',
            [PLUGIN_OPTION_STAGE_PUBLISH_BASE]: mountRoot,
            // Where the plugin sees that dir: stage_publish_base_dir when it is isolated, else the host path itself.
            [PLUGIN_OPTION_CONTAINER_MOUNT_POINT]: ctx.task.isolated ? this.config.stagePublishBaseDir : mountRoot,
            [PLUGIN_OPTION_PLUGIN_TYPE]: this.config.type,
          },
        });
        done.push({ type, name: this.config.id, allocId: ctx.alloc.id });
      }
    } catch (err) {
      for (const entry of done.reverse()) this.deregisterOne(entry);
      throw err;
    }
    this.registered = done;
  }

  private async probeOnce(
    client: CSIClient,
    signal: AbortSignal,
    timeoutMs: number,
  ): Promise<{ healthy: true } | { healthy: false; problem: string }> {
    try {
      const result = await client.probe({ signal, timeoutMs, retry: { maxAttempts: 1 } });
      return result.ready ? { healthy: true } : { healthy: false, problem: 'probe answered not ready' };
    } catch (err) {
      return { healthy: false, problem: errorMessage(err) };
    }
  }

  private scheduleSteadyProbe(ctx: TaskHookContext, client: CSIClient, signal: AbortSignal): void {
    if (signal.aborted) return;
    this.steadyTimer = this.clock.setTimeout(() => {
      void this.probeOnce(client, signal, this.timeouts.probe()).then((probe) => {
        if (signal.aborted) return;
        if (probe.healthy !== this.healthy) {
          this.healthy = probe.healthy;
          ctx.emitEvent(
            probe.healthy
              ? { type: TASK_EVENT_PLUGIN_HEALTHY, message: `plugin: ${this.config.id}` }
              : { type: TASK_EVENT_PLUGIN_UNHEALTHY, message: `plugin: ${this.config.id}: ${probe.problem}` },
          );
        }
        this.scheduleSteadyProbe(ctx, client, signal);
      });
    }, this.heartbeat.probeInterval());
  }

  private deregisterOne(entry: { type: string; name: string; allocId: string }): void {
    try {
      this.registry.deregister(entry.type, entry.name, entry.allocId);
    } catch (err) {
      this.logger.error('failed to deregister CSI plugin', { type: entry.type, name: entry.name, alloc_id: entry.allocId, error: err });
    }
  }

  private stopLoop(): void {
    this.loop?.abort();
    this.loop = undefined;
    this.steadyTimer?.dispose();
    this.steadyTimer = undefined;
  }

  private teardown(ctx: TaskHookContext): void {
    this.stopLoop();
    // Everything of this plugin registered for this alloc — also entries an
    // earlier agent registered and this one restored, when the task ends
    // before it could re-register them.
    let entries: { type: string; name: string; allocId: string }[] = this.registered;
    try {
      entries = this.registry.allocPlugins(ctx.alloc.id).filter((p) => p.name === this.config.id);
    } catch (err) {
      this.logger.warn('could not list the registrations of this alloc; deregistering what this task registered', {
        alloc_id: ctx.alloc.id,
        error: err,
      });
    }
    for (const entry of entries) this.deregisterOne({ type: entry.type, name: entry.name, allocId: entry.allocId });
    this.registered = [];
    this.healthy = false;
    this.client?.dispose();
    this.client = undefined;
    try {
      fs.rmSync(pluginSocketDir(this.dataDir, ctx.alloc.id), { recursive: true, force: true });
    } catch (err) {
      this.logger.warn('could not remove the plugin socket dir', { alloc_id: ctx.alloc.id, error: err });
    }
  }
}

/** Makes one supervisor hook per plugin task, with the agent's shared services. */
@injectable()
export class CSIPluginSupervisorFactory implements ICSIPluginSupervisorFactory {
  constructor(
    @inject(IHooksConfig) private readonly config: HooksConfig,
    @inject(IPluginRegistry) private readonly registry: PluginRegistry,
    @inject(ICSIClientFactory) private readonly clients: CSIClientFactory,
    @inject(IClock) private readonly clock: Clock,
    @inject(IHeartbeatStrategy) private readonly heartbeat: HeartbeatStrategy,
    @inject(ITimeoutPolicy) private readonly timeouts: TimeoutPolicy,
    @inject(ILogger) private readonly logger: Logger,
  ) {}

  create(plugin: CSIPluginConfig): CSIPluginSupervisorHook {
    return new CSIPluginSupervisorHook(
      plugin,
      this.config.dataDir,
      this.registry,
      this.clients,
      this.clock,
      this.heartbeat,
      this.timeouts,
      this.logger.child({ hook: 'csi_plugin_supervisor' }),
      this.mountRootUsers,
    );
  }

  /** Per mount root, the isolated plugin tasks using its shared bind: a release waits for the last of them. */
  private readonly mountRootUsers = new Map<string, Set<CSIPluginSupervisorHook>>();
}
