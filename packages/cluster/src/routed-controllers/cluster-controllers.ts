// Controller RPCs routed across the cluster (config `cluster { … }`). A CSI
// plugin often runs its controller on one or two nodes and its node plugin
// on every node; a node without the controller still needs it (a claim's
// ControllerPublishVolume, a volume create, delete or expand, snapshots).
//
// Such a node serves, on a unix socket in its data dir, a CSI endpoint of
// its own for the plugin (Identity and Controller services) and registers it
// in its plugin registry as the plugin's controller, under the alloc id
// `cluster-controller:<plugin>` — only while some node of the cluster says
// it has a controller of the plugin (a node-only plugin gets none, and its
// claims skip the controller as on one agent). Everything above the
// registry — the CSI manager's fingerprints and probes, the catalog's
// controller calls — works as with a local controller. Each call is sent,
// over HTTP with the agents' ACL token, to an agent whose node runs a
// healthy controller of the plugin (as the node records say), which makes
// it on its own controller's socket and answers with the plugin's response
// or gRPC status. The next node's controller is tried only when the call
// cannot have been made: the agent could not be reached (refused, no
// route), or answered that its controller is not there or not running;
// anything else (a timeout, a reset after sending) might have been made and
// is not sent twice — CSI allows one call in flight per volume. The node
// that answered last is tried first next time; one that could not be
// reached is tried last for a while. A node never routes to a routed
// controller (it serves only a controller of its own, and advertises only
// those), so a call crosses at most one hop. A controller of its own that
// arrives here takes over from the routed one once it serves (healthy), as
// any plugin update does.
import { errorMessage, type Clock, type Logger } from '@csiplug/core';
import {
  CSIStatusError,
  GrpcInvoker,
  GrpcStatus,
  csiPackageDefinition,
  CSI_SERVICES,
  serveCsi,
  type CsiCallContext,
  type CsiServer,
} from '@csiplug/csi';
import { PLUGIN_OPTION_PLUGIN_TYPE } from '@csiplug/csimanager';
import type { PluginRegistry } from '@csiplug/registry';
import { createHash } from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { ApiClient, ApiError, type RoutedAnswer } from '@csiplug/api';
import type { ClusterMembership } from '../membership';
import type { ClusterNodeView } from '../node-registry';

export const ROUTED_CONTROLLER_PREFIX = 'cluster-controller:';

/** Whether a registration is a controller routed to another node (never advertised, never served onwards). */
export const isRoutedController = (allocId: string): boolean => allocId.startsWith(ROUTED_CONTROLLER_PREFIX);

/** The ready nodes other than `self` whose records say they run a healthy controller of the plugin (as the membership last read them). */
export function healthyControllerNodes(
  membership: Pick<ClusterMembership, 'nodeName' | 'lastSeenNodes'>,
  plugin: string,
): ClusterNodeView[] {
  return (membership.lastSeenNodes?.nodes ?? []).filter(
    (n) =>
      n.name !== membership.nodeName &&
      n.status === 'ready' &&
      n.plugins.some((p) => p.id === plugin && p.type === 'csi-controller' && p.healthy),
  );
}

/** The CSI services a routed call may name. */
export type RoutedService = 'identity' | 'controller';

/** How long a routed call may take at the most, end to end (a CreateVolume may be slow); the caller's own deadline cuts it shorter. */
const CALL_TIMEOUT_MS = 120_000;
/** How long a node that could not be reached is tried last. */
const UNREACHABLE_COOLDOWN_MS = 30_000;

/** The RPC names of a service, from csi.proto. */
export function rpcsOf(service: RoutedService): string[] {
  const def = csiPackageDefinition()[CSI_SERVICES[service]] as Record<string, unknown> | undefined;
  return Object.keys(def ?? {});
}

/** The answer of a node that could not make the call (its controller not here or not running): the caller may try another. */
export class RoutedControllerUnavailableError extends ApiError {
  constructor(message: string) {
    super(503, 'EPLUGIN_UNAVAILABLE', message);
  }
}

/**
 * Makes a routed call on this node's own controller of the plugin (the
 * agent that was routed to): the serving registration (or the newest of
 * its own), the plugin's answer or status. Throws
 * RoutedControllerUnavailableError (503) when this node runs no
 * controller of its own, or its controller cannot be reached.
 */
export async function answerRoutedCall(
  registry: PluginRegistry,
  plugin: string,
  service: string,
  rpc: string,
  request: unknown,
  signal?: AbortSignal,
): Promise<RoutedAnswer> {
  if (service !== 'identity' && service !== 'controller')
    throw ApiError.badRequest(`service must be identity or controller (got "${service}")`);
  if (!rpcsOf(service).includes(rpc)) throw ApiError.badRequest(`"${rpc}" is not an RPC of the CSI ${service} service`);
  if (request === null || typeof request !== 'object' || Array.isArray(request))
    throw ApiError.badRequest('request must be a JSON object (the CSI request message)');
  const active = registry.get('csi-controller', plugin);
  const own =
    active && !isRoutedController(active.allocId)
      ? active
      : registry.registrations('csi-controller', plugin).find((r) => !isRoutedController(r.allocId));
  if (!own) throw new RoutedControllerUnavailableError(`no controller of plugin "${plugin}" runs on this node`);
  const invoker = new GrpcInvoker(`unix://${own.socketPath}`);
  try {
    return { response: await invoker.unary(service, rpc, request, new Date(Date.now() + CALL_TIMEOUT_MS), signal) };
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    // The plugin not running (its socket answers no one): this node cannot make the call; another one may.
    if (code === GrpcStatus.UNAVAILABLE)
      throw new RoutedControllerUnavailableError(
        `the controller of plugin "${plugin}" on this node is not answering: ${errorMessage(err)}`,
      );
    if (typeof code === 'number') return { error: { code, details: (err as { details?: string }).details ?? errorMessage(err) } };
    throw err;
  } finally {
    invoker.dispose();
  }
}

/** What the router needs to send a call (an ApiClient in the agent; a fake in unit specs). */
export type RoutedCaller = (
  address: string,
  token: string | undefined,
  plugin: string,
  service: RoutedService,
  rpc: string,
  request: unknown,
  signal: AbortSignal,
) => Promise<RoutedAnswer>;

const apiCaller: RoutedCaller = (address, token, plugin, service, rpc, request, signal) =>
  new ApiClient({ address, ...(token ? { token } : {}), timeoutMs: CALL_TIMEOUT_MS }).routedCsiCall(plugin, service, rpc, request, signal);

export interface ControllerRouterDeps {
  dataDir: string;
  registry: PluginRegistry;
  membership: Pick<ClusterMembership, 'nodeName' | 'lastSeenNodes'>;
  /** The alloc id of the plugin's serving controller instance (the CSI manager's), if any. */
  servingController: (plugin: string) => { allocId: string; healthy: boolean } | undefined;
  /** The agents' shared ACL token. */
  token: () => string | undefined;
  clock: Clock;
  logger: Logger;
  /** How a call is sent (default: the agent's API client). */
  caller?: RoutedCaller;
}

/** Which node answered a routed controller's calls last, for `plugin status`. */
export interface RoutedControllerView {
  /** The node whose controller answered the last call. */
  node?: string;
}

export class ControllerRouter {
  private readonly servers = new Map<string, CsiServer>();
  /** The node whose controller answered last, per plugin: tried first next time. */
  private readonly lastGood = new Map<string, string>();
  /** Nodes that could not be reached, and until when they are tried last. */
  private readonly unreachable = new Map<string, number>();
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;

  constructor(private readonly deps: ControllerRouterDeps) {}

  /** A short fixed-length name: a unix socket path has room for 107 bytes, and a plugin id may be 255. */
  socketPathOf(plugin: string): string {
    return path.join(this.deps.dataDir, 'cluster', 'controllers', `${createHash('sha256').update(plugin).digest('hex').slice(0, 16)}.sock`);
  }

  /** What `plugin status` shows of a routed controller. */
  view(plugin: string): RoutedControllerView {
    const node = this.lastGood.get(plugin);
    return node ? { node } : {};
  }

  /**
   * Makes the routed controllers match this node and the cluster: one for
   * each plugin with a node plugin here, no controller of its own serving
   * here, and a controller on some node of the cluster; none otherwise. Runs
   * one at a time (a call during one runs once more after it); one plugin's
   * failure never holds the others, and the next call tries it again.
   */
  reconcile(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    const run = async () => {
      try {
        do {
          this.again = false;
          await this.reconcileOnce().catch((err: unknown) =>
            this.deps.logger.warn('could not set up the routed controllers; trying again at the next change', { error: errorMessage(err) }),
          );
        } while (this.again && !this.closed);
      } finally {
        // Cleared here, not in a later callback: a call arriving after the loop's last check starts a new run.
        this.running = undefined;
      }
    };
    this.running = run();
    return this.running;
  }

  /** The plugins this node routes controller calls for, as things are now. */
  wantedPlugins(): Set<string> | undefined {
    const { registry, membership } = this.deps;
    // Before the cluster's nodes were first read (just after a start, or etcd away since): nothing is known, nothing changes.
    if (!membership.lastSeenNodes) return undefined;
    const self = membership.nodeName;
    const elsewhere = new Set<string>();
    for (const n of membership.lastSeenNodes?.nodes ?? []) {
      if (n.name === self) continue;
      for (const p of n.plugins) if (p.type === 'csi-controller') elsewhere.add(p.id);
    }
    const wanted = new Set<string>();
    for (const p of registry.list('csi-node')) {
      const ownNode = registry.registrations('csi-node', p.name).some((r) => !isRoutedController(r.allocId));
      if (!ownNode || !elsewhere.has(p.name)) continue;
      // A controller of its own that serves here (healthy, the CSI manager's serving instance) ends the routing; one still starting does not yet.
      const serving = this.deps.servingController(p.name);
      const ownServes = serving !== undefined && !isRoutedController(serving.allocId) && serving.healthy;
      if (!ownServes) wanted.add(p.name);
    }
    return wanted;
  }

  private async reconcileOnce(): Promise<void> {
    const { registry, logger } = this.deps;
    const wanted = this.wantedPlugins();
    if (!wanted) {
      // Serve again what a restart left registered (its calls can go out once nodes are known), remove nothing.
      for (const p of registry.list('csi-controller')) {
        for (const r of registry.registrations('csi-controller', p.name))
          if (isRoutedController(r.allocId)) await this.serve(p.name).catch(() => undefined);
      }
      return;
    }
    for (const name of wanted) {
      if (this.closed) return;
      try {
        await this.serve(name);
      } catch (err) {
        logger.warn("could not route the plugin's controller calls from this node; trying again at the next change", {
          plugin_id: name,
          error: errorMessage(err),
        });
      }
    }
    // A routed controller no longer wanted (a controller of its own serves here now, no node plugin, no controller anywhere): it goes.
    for (const p of registry.list('csi-controller')) {
      for (const r of registry.registrations('csi-controller', p.name)) {
        if (!isRoutedController(r.allocId) || wanted.has(p.name)) continue;
        try {
          registry.deregister('csi-controller', p.name, r.allocId);
          logger.info("the plugin's controller calls are no longer routed from this node", { plugin_id: p.name });
        } catch (err) {
          logger.warn('could not remove a routed controller; trying again at the next change', {
            plugin_id: p.name,
            error: errorMessage(err),
          });
        }
      }
    }
    for (const [name, server] of [...this.servers]) {
      if (wanted.has(name)) continue;
      this.servers.delete(name);
      await server.dispose().catch(() => undefined);
    }
  }

  /** The plugin's routed socket served and registered (again, when the registration was read back at start: a fresh fingerprint). */
  private async serve(name: string): Promise<void> {
    const { registry, logger } = this.deps;
    const socketPath = this.socketPathOf(name);
    if (!this.servers.has(name)) {
      fs.mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o700 });
      const server = await serveCsi(
        `unix://${socketPath}`,
        { identity: this.handlers(name, 'identity'), controller: this.handlers(name, 'controller') },
        { logger },
      );
      if (this.closed) {
        await server.dispose();
        return;
      }
      this.servers.set(name, server);
    }
    const allocId = ROUTED_CONTROLLER_PREFIX + name;
    const current = registry.registrations('csi-controller', name).find((r) => r.allocId === allocId);
    if (!current || current.socketPath !== socketPath || current.restored) {
      registry.register({
        type: 'csi-controller',
        name,
        allocId,
        socketPath,
        version: '',
        options: { [PLUGIN_OPTION_PLUGIN_TYPE]: 'controller' },
      });
      if (!current)
        logger.info('this node has no controller of the plugin: its controller calls are routed to a node that has one', {
          plugin_id: name,
        });
    }
  }

  /** Every RPC of the service, each sent to a node with a healthy controller of the plugin. */
  private handlers(plugin: string, service: RoutedService): Record<string, (request: unknown, ctx: CsiCallContext) => Promise<unknown>> {
    return Object.fromEntries(
      rpcsOf(service).map((rpc) => [rpc, (request: unknown, ctx: CsiCallContext) => this.route(plugin, service, rpc, request, ctx.signal)]),
    );
  }

  /** The ready nodes, other than this one, that say they run a healthy controller of the plugin: the one that answered last first, unreachable ones last. */
  private targets(plugin: string): Array<{ name: string; address: string }> {
    const now = this.deps.clock.now();
    const last = this.lastGood.get(plugin);
    const rank = (name: string) => ((this.unreachable.get(name) ?? 0) > now ? 2 : name === last ? 0 : 1);
    return healthyControllerNodes(this.deps.membership, plugin)
      .filter((n) => n.address)
      .map((n) => ({ name: n.name, address: n.address! }))
      .sort((a, b) => rank(a.name) - rank(b.name) || a.name.localeCompare(b.name));
  }

  /** One call of the plugin's routed controller, as its socket's handlers make it: sent to a node with a healthy controller. */
  async route(plugin: string, service: RoutedService, rpc: string, request: unknown, signal: AbortSignal): Promise<unknown> {
    const targets = this.targets(plugin);
    if (targets.length === 0) {
      throw new CSIStatusError(GrpcStatus.UNAVAILABLE, `no ready node of the cluster runs a healthy controller of plugin "${plugin}"`);
    }
    const failures: string[] = [];
    const send = this.deps.caller ?? apiCaller;
    for (const target of targets) {
      let answer: RoutedAnswer;
      try {
        answer = await send(target.address, this.deps.token(), plugin, service, rpc, request, signal);
      } catch (err) {
        if (signal.aborted)
          throw new CSIStatusError(GrpcStatus.CANCELLED, `${rpc}: the caller gave up while node ${target.name} was asked`);
        const unreached =
          err instanceof ApiError &&
          err.status === 0 &&
          /ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|is not a URL|must use http/.test(err.message);
        const notThere = err instanceof ApiError && err.status === 503 && err.code === 'EPLUGIN_UNAVAILABLE';
        if (unreached) this.unreachable.set(target.name, this.deps.clock.now() + UNREACHABLE_COOLDOWN_MS);
        if (unreached || notThere) {
          // The call was not made there: the next node's controller.
          failures.push(`${target.name}: ${errorMessage(err)}`);
          continue;
        }
        // It may have been made (a timeout, a reset after sending, an error of that agent's): not sent twice.
        if (err instanceof ApiError && err.status >= 400 && err.status < 500)
          throw new CSIStatusError(GrpcStatus.INTERNAL, `${rpc} routed to node ${target.name} was refused: ${errorMessage(err)}`);
        throw new CSIStatusError(
          GrpcStatus.UNAVAILABLE,
          `${rpc} routed to node ${target.name} got no answer (${errorMessage(err)}); it may have been made there`,
        );
      }
      if (answer !== null && typeof answer === 'object' && 'error' in answer && answer.error && typeof answer.error.code === 'number') {
        throw new CSIStatusError(answer.error.code, String(answer.error.details ?? ''));
      }
      if (
        answer === null ||
        typeof answer !== 'object' ||
        !('response' in answer) ||
        answer.response === null ||
        typeof answer.response !== 'object'
      ) {
        throw new CSIStatusError(GrpcStatus.INTERNAL, `${rpc} routed to node ${target.name}: its answer is not a CSI response`);
      }
      this.lastGood.set(plugin, target.name);
      this.unreachable.delete(target.name);
      return answer.response;
    }
    throw new CSIStatusError(GrpcStatus.UNAVAILABLE, `no controller of plugin "${plugin}" could be reached (${failures.join('; ')})`);
  }

  /** Stops serving; the registrations stay for the next agent, which serves them again. */
  async dispose(): Promise<void> {
    this.closed = true;
    await this.running?.catch(() => undefined);
    await Promise.all([...this.servers.values()].map((s) => s.dispose().catch(() => undefined)));
    this.servers.clear();
  }
}

/** Without a cluster: the routed controllers a cluster-mode run of this data dir registered route nowhere, and go. */
export function dropRoutedControllers(registry: PluginRegistry): void {
  for (const p of registry.list('csi-controller')) {
    for (const r of registry.registrations('csi-controller', p.name))
      if (isRoutedController(r.allocId)) registry.deregister('csi-controller', p.name, r.allocId);
  }
}
