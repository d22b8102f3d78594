// Controller RPCs routed across the cluster (config `cluster { … }`). A CSI
// plugin often runs its controller on one or two nodes and its node plugin
// on every node; a node without the controller still needs it (a claim's
// ControllerPublishVolume, a volume create, delete or expand, snapshots).
//
// Such a node serves, on a unix socket in its data dir, a CSI endpoint of
// its own for the plugin (Identity and Controller services) and registers it
// in its plugin registry as the plugin's controller, under the alloc id
// `cluster-controller:<plugin>`. Everything above the registry — the CSI
// manager's fingerprints and probes, the catalog's controller calls — works
// as with a local controller. Each call is sent, over HTTP with the agents'
// ACL token, to an agent whose node runs a healthy controller of the plugin
// (as the node records say), which makes it on its own controller's socket
// and answers with the plugin's response or gRPC status. When that agent
// cannot be reached, the next node's controller is tried (CSI requires
// controller calls to be idempotent); the one that answered last is tried
// first next time. A node never routes to a routed controller (it serves
// only a controller of its own, and advertises only those), so a call
// crosses at most one hop.
import { errorMessage, type Clock, type Logger } from '@csiplug/core';
import { CSIStatusError, GrpcInvoker, GrpcStatus, csiPackageDefinition, CSI_SERVICES, serveCsi, type CsiServer } from '@csiplug/csi';
import { PLUGIN_OPTION_PLUGIN_TYPE } from '@csiplug/csimanager';
import type { PluginRegistry } from '@csiplug/registry';
import * as fs from 'fs';
import * as path from 'path';
import { ApiClient } from './api/api-client';
import { ApiError } from './api/api-error';
import type { ClusterMembership } from './cluster-membership';
import type { RoutedAnswer } from './service';

export const ROUTED_CONTROLLER_PREFIX = 'cluster-controller:';

/** Whether a registration is a controller routed to another node (never advertised, never served onwards). */
export const isRoutedController = (allocId: string): boolean => allocId.startsWith(ROUTED_CONTROLLER_PREFIX);

/** The CSI services a routed call may name. */
export type RoutedService = 'identity' | 'controller';


/** How long a routed call may take, end to end (a CreateVolume may be slow). */
const CALL_TIMEOUT_MS = 120_000;

/** The RPC names of a service, from csi.proto. */
export function rpcsOf(service: RoutedService): string[] {
  const def = csiPackageDefinition()[CSI_SERVICES[service]] as Record<string, unknown> | undefined;
  return Object.keys(def ?? {});
}

/**
 * Makes a routed call on this node's own controller of the plugin (the
 * agent that was routed to): its socket, the plugin's answer or status.
 * Throws ApiError 503 when this node runs no controller of its own.
 */
export async function answerRoutedCall(registry: PluginRegistry, plugin: string, service: string, rpc: string, request: unknown): Promise<RoutedAnswer> {
  if (service !== 'identity' && service !== 'controller') throw ApiError.badRequest(`service must be identity or controller (got "${service}")`);
  if (!rpcsOf(service).includes(rpc)) throw ApiError.badRequest(`"${rpc}" is not an RPC of the CSI ${service} service`);
  if (request === null || typeof request !== 'object' || Array.isArray(request)) throw ApiError.badRequest('request must be a JSON object (the CSI request message)');
  const own = registry.registrations('csi-controller', plugin).find((r) => !isRoutedController(r.allocId));
  if (!own) throw new ApiError(503, 'EPLUGIN_UNAVAILABLE', `no controller of plugin "${plugin}" runs on this node`);
  const invoker = new GrpcInvoker(`unix://${own.socketPath}`);
  try {
    return { response: await invoker.unary(service, rpc, request, new Date(Date.now() + CALL_TIMEOUT_MS)) };
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'number') return { error: { code, details: (err as { details?: string }).details ?? errorMessage(err) } };
    throw err;
  } finally {
    invoker.dispose();
  }
}

export interface ControllerRouterDeps {
  dataDir: string;
  registry: PluginRegistry;
  membership: ClusterMembership;
  /** The agents' shared ACL token. */
  token: () => string | undefined;
  clock: Clock;
  logger: Logger;
}

export class ControllerRouter {
  private readonly servers = new Map<string, CsiServer>();
  /** The node whose controller answered last, per plugin: tried first next time. */
  private readonly lastGood = new Map<string, string>();
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;

  constructor(private readonly deps: ControllerRouterDeps) {}

  socketPathOf(plugin: string): string {
    return path.join(this.deps.dataDir, 'cluster', 'controllers', `${plugin}.sock`);
  }

  /**
   * Makes the routed controllers match this node: one for each plugin with
   * a node plugin here and no controller of its own; none otherwise. Runs
   * one at a time (a call during one runs once more after it).
   */
  reconcile(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.reconcileOnce().catch((err) => this.deps.logger.warn('could not set up the routed controllers; trying again at the next change', { error: errorMessage(err) }));
      } while (this.again && !this.closed);
    })().finally(() => (this.running = undefined));
    return this.running;
  }

  private async reconcileOnce(): Promise<void> {
    const { registry } = this.deps;
    const wanted = new Set<string>();
    for (const p of registry.list('csi-node')) {
      const name = p.name;
      const ownController = registry.registrations('csi-controller', name).some((r) => !isRoutedController(r.allocId));
      const ownNode = registry.registrations('csi-node', name).some((r) => !isRoutedController(r.allocId));
      if (ownNode && !ownController) wanted.add(name);
    }
    for (const name of wanted) {
      if (this.closed) return;
      if (!this.servers.has(name)) {
        const socketPath = this.socketPathOf(name);
        fs.mkdirSync(path.dirname(socketPath), { recursive: true, mode: 0o700 });
        const server = await serveCsi(`unix://${socketPath}`, { identity: this.handlers(name, 'identity'), controller: this.handlers(name, 'controller') }, { logger: this.deps.logger });
        if (this.closed) {
          await server.dispose();
          return;
        }
        this.servers.set(name, server);
      }
      const allocId = ROUTED_CONTROLLER_PREFIX + name;
      const socketPath = this.socketPathOf(name);
      const current = registry.registrations('csi-controller', name).find((r) => r.allocId === allocId);
      if (!current || current.socketPath !== socketPath) {
        registry.register({ type: 'csi-controller', name, allocId, socketPath, version: '', options: { [PLUGIN_OPTION_PLUGIN_TYPE]: 'controller' } });
        this.deps.logger.info('this node has no controller of the plugin: its controller calls are routed to a node that has one', { plugin_id: name });
      }
    }
    // A routed controller no longer wanted (a controller of its own here now, or no node plugin): it goes.
    for (const p of registry.list('csi-controller')) {
      for (const r of registry.registrations('csi-controller', p.name)) {
        if (!isRoutedController(r.allocId) || wanted.has(p.name)) continue;
        registry.deregister('csi-controller', p.name, r.allocId);
        this.deps.logger.info('the plugin\'s controller calls are no longer routed from this node', { plugin_id: p.name });
      }
    }
    for (const [name, server] of [...this.servers]) {
      if (wanted.has(name)) continue;
      this.servers.delete(name);
      await server.dispose();
    }
  }

  /** Every RPC of the service, each sent to a node with a healthy controller of the plugin. */
  private handlers(plugin: string, service: RoutedService): Record<string, (request: unknown) => Promise<unknown>> {
    return Object.fromEntries(rpcsOf(service).map((rpc) => [rpc, (request: unknown) => this.route(plugin, service, rpc, request)]));
  }

  /** The ready nodes, other than this one, that say they run a healthy controller of the plugin: the one that answered last first. */
  private targets(plugin: string): Array<{ name: string; address: string }> {
    const self = this.deps.membership.nodeName;
    const nodes = (this.deps.membership.lastSeenNodes?.nodes ?? [])
      .filter((n) => n.name !== self && n.status === 'ready' && n.address && n.plugins.some((p) => p.id === plugin && p.type === 'csi-controller' && p.healthy))
      .map((n) => ({ name: n.name, address: n.address! }))
      .sort((a, b) => a.name.localeCompare(b.name));
    const last = this.lastGood.get(plugin);
    return last ? [...nodes.filter((n) => n.name === last), ...nodes.filter((n) => n.name !== last)] : nodes;
  }

  private async route(plugin: string, service: RoutedService, rpc: string, request: unknown): Promise<unknown> {
    const targets = this.targets(plugin);
    if (targets.length === 0) {
      throw new CSIStatusError(GrpcStatus.UNAVAILABLE, `no ready node of the cluster runs a healthy controller of plugin "${plugin}"`);
    }
    const failures: string[] = [];
    for (const target of targets) {
      const token = this.deps.token();
      const client = new ApiClient({ address: target.address, ...(token ? { token } : {}), timeoutMs: CALL_TIMEOUT_MS, clock: this.deps.clock });
      let answer: RoutedAnswer;
      try {
        answer = await client.routedCsiCall(plugin, service, rpc, request);
      } catch (err) {
        // That agent is away, or its controller is (503): the next node's controller.
        failures.push(`${target.name}: ${errorMessage(err)}`);
        continue;
      }
      this.lastGood.set(plugin, target.name);
      if ('error' in answer) throw new CSIStatusError(answer.error.code, answer.error.details);
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
