// The node as the API shows it: the agent's health, this node (drivers,
// plugins, allocs) and, in a cluster, every node of it (cluster mode's).
import { findRunc } from '@csiplug/driver';
import type { AgentContext } from './agent-context';
import { isRoutedController } from '@csiplug/cluster';
import type { AgentHealth, NodeList, NodeView } from '@csiplug/api';
import type { NodeAttributes } from '@csiplug/jobspec';

export const AGENT_VERSION = '0.1.0';

export class NodeViews {
  constructor(
    private readonly ctx: AgentContext,
    /** Cluster mode, once made (undefined for an agent on its own): the cluster's nodes. */
    private readonly cluster: () => { listNodes(): Promise<NodeList> } | undefined = () => undefined,
    /** This node's fingerprint (datacenter, region, class, attributes, meta), when the agent made one. */
    private readonly attributes?: NodeAttributes,
  ) {}

  /**
   * This node's ID, the one every route gives (Node.ID, NodeListStub.ID,
   * the agent's node_id, Allocation.NodeID, the keys of a CSIPlugin's
   * maps): in a cluster its node name (cluster.node_name, by default the
   * node_id), which the cluster's records, claims and placements carry;
   * on its own, the config's node_id.
   */
  nodeId(): string {
    const { config } = this.ctx;
    return config.cluster?.nodeName ?? config.nodeId;
  }

  /** Nomad's Node.Name: in a cluster the node name its record has (so the list and the one-node read agree); on its own, the config's `name` (default: the host name). */
  private nodeName(): string {
    const { config } = this.ctx;
    return config.cluster?.nodeName ?? config.node.name;
  }

  health(): AgentHealth {
    const counts = { running: 0, pending: 0, dead: 0 };
    for (const r of this.ctx.allocs.all()) {
      const s = r.alloc.clientStatus;
      if (s === 'running') counts.running++;
      else if (s === 'pending') counts.pending++;
      else counts.dead++;
    }
    const plugins = this.ctx.csiManager.plugins();
    return {
      ok: !this.ctx.closed,
      nodeId: this.nodeId(),
      dataDir: this.ctx.config.dataDir,
      version: AGENT_VERSION,
      startedAt: this.ctx.startedAt,
      allocs: counts,
      plugins: { healthy: plugins.filter((p) => p.healthy).length, total: plugins.length },
    };
  }

  node(): NodeView {
    const { config } = this.ctx;
    const health = this.health();
    const runc = findRunc();
    return {
      id: this.nodeId(),
      name: this.nodeName(),
      version: AGENT_VERSION,
      dataDir: config.dataDir,
      startedAt: this.ctx.startedAt,
      status: this.ctx.closed ? 'down' : 'ready',
      ...(this.attributes
        ? {
            datacenter: this.attributes.datacenter,
            region: this.attributes.region,
            nodeClass: this.attributes.nodeClass,
            attributes: { ...this.attributes.attributes },
            meta: { ...this.attributes.meta },
          }
        : {}),
      drivers: {
        exec: runc
          ? { detected: true, healthy: true, description: `isolated tasks on runc (${runc})` }
          : {
              detected: false,
              healthy: false,
              description: 'runc is not installed (apt-get install runc): exec tasks fail to start; raw_exec works',
            },
        // OCI images on the same runc, pulled into this agent's image store (Nomad's names: jobs written for docker run unchanged).
        ...imageDrivers(runc),
        // Nomad's raw_exec fingerprint when disabled: undetected, "disabled" (a cluster places no raw_exec task here).
        raw_exec: config.rawExec.enabled
          ? { detected: true, healthy: true, description: 'host processes' }
          : { detected: false, healthy: false, description: 'disabled (plugin "raw_exec" { config { enabled = true } } enables it)' },
      },
      // A controller routed to another node is that node's, not this one's: never advertised (no call is routed twice).
      plugins: this.ctx.csiManager
        .plugins()
        .filter((p) => !isRoutedController(p.allocId))
        .map((p) => ({
          id: p.name,
          type: p.type,
          healthy: p.healthy,
          description: p.description,
          ...(p.node
            ? {
                nodeId: p.node.nodeId,
                maxVolumes: Number.isFinite(p.node.maxVolumes) ? p.node.maxVolumes : ('unlimited' as const),
                ...(p.node.topology ? { topology: { ...p.node.topology } } : {}),
              }
            : {}),
        }))
        .sort((a, b) => a.id.localeCompare(b.id) || a.type.localeCompare(b.type)),
      allocs: health.allocs,
    };
  }

  async listNodes(): Promise<NodeList> {
    const cluster = this.cluster();
    if (cluster) return cluster.listNodes();
    const n = this.node();
    return {
      cluster: false,
      nodes: [
        {
          ...(n.id !== n.name ? { id: n.id } : {}),
          name: n.name,
          status: n.status,
          nodeClass: n.nodeClass ?? '',
          ...(n.datacenter !== undefined ? { datacenter: n.datacenter } : {}),
          drivers: Object.keys(n.drivers).filter((d) => n.drivers[d as keyof NodeView['drivers']].detected),
          plugins: n.plugins.map((p) => ({ id: p.id, type: p.type, healthy: p.healthy })),
          self: true,
        },
      ],
    };
  }
}

/** The docker and podman drivers: OCI images on runc, so detected exactly where exec is. */
function imageDrivers(runc: string | undefined): Pick<NodeView['drivers'], 'docker' | 'podman'> {
  const view = runc
    ? { detected: true, healthy: true, description: `OCI images isolated on runc (${runc}), no Docker daemon` }
    : { detected: false, healthy: false, description: 'runc is not installed (apt-get install runc): image tasks fail to start' };
  return { docker: { ...view }, podman: { ...view } };
}
