// Plugins as the API shows them: each plugin's instances on this node (its
// fingerprint as flat facts, the allocs that run it) and, in a cluster, its
// instances across the cluster's nodes (cluster mode's part).
import type { PluginInfo } from '@csiplug/csimanager';
import type { AgentContext } from './agent-context';
import { isRoutedController } from '@csiplug/cluster';
import type { PluginInstanceView, PluginView } from '@csiplug/api';

/** What cluster mode adds to the plugin views. */
export interface ClusterPluginViews {
  /** The plugin across the cluster's nodes, from their records as last read; undefined before the first read. */
  pluginView(id: string): PluginView['cluster'];
  /** Where a controller routed to other nodes sends its calls. */
  routedView(id: string): NonNullable<PluginInstanceView['routed']>;
  /** The plugins the cluster's nodes said they run, as last read. */
  pluginIds(): string[];
}

/** What a fingerprint found, as flat name → value pairs for status output. */
function fingerprintFacts(info: PluginInfo): Record<string, string | number | boolean> {
  const facts: Record<string, string | number | boolean> = {};
  if (info.lastError) facts['Last Error'] = info.lastError;
  if (info.node) {
    facts['Node ID'] = info.node.nodeId;
    facts['Max Volumes'] = Number.isFinite(info.node.maxVolumes) ? info.node.maxVolumes : 'unlimited';
    if (info.node.topology)
      facts['Topology'] = Object.entries(info.node.topology)
        .map(([k, v]) => `${k}=${v}`)
        .join(', ');
    facts['Requires Staging'] = info.node.requiresStaging;
    facts['Volume Stats'] = info.node.supportsStats;
    facts['Volume Condition'] = info.node.supportsCondition;
    facts['Expand'] = info.node.supportsExpand;
  }
  if (info.controller) {
    facts['Create/Delete Volumes'] = info.controller.supportsCreateDelete;
    facts['Attach/Detach (ControllerPublish)'] = info.controller.supportsAttachDetach;
    facts['List Volumes'] = info.controller.supportsListVolumes;
    facts['List Volumes Published Nodes'] = info.controller.capabilities.listVolumesPublishedNodes;
    facts['Get Capacity'] = info.controller.supportsGetCapacity;
    facts['Snapshots'] = info.controller.supportsSnapshots;
    facts['List Snapshots'] = info.controller.capabilities.listSnapshots;
    facts['Clone'] = info.controller.supportsClone;
    facts['Expand'] = info.controller.supportsExpand;
  }
  if (info.pluginCapabilities) {
    facts['Accessibility Constraints'] = info.pluginCapabilities.accessibilityConstraints;
    if (info.pluginCapabilities.onlineExpansion || info.pluginCapabilities.offlineExpansion) {
      facts['Volume Expansion'] = [
        info.pluginCapabilities.onlineExpansion && 'online',
        info.pluginCapabilities.offlineExpansion && 'offline',
      ]
        .filter(Boolean)
        .join(', ');
    }
  }
  return facts;
}

export class PluginViews {
  constructor(
    private readonly ctx: AgentContext,
    private readonly cluster?: ClusterPluginViews,
  ) {}

  listPlugins(): PluginView[] {
    const { registry } = this.ctx;
    const ids = new Set([...registry.list('csi-controller'), ...registry.list('csi-node')].map((r) => r.name));
    for (const p of this.ctx.csiManager.plugins()) ids.add(p.name);
    for (const id of this.cluster?.pluginIds() ?? []) ids.add(id);
    return [...ids].sort().flatMap((id) => this.getPlugin(id) ?? []);
  }

  getPlugin(id: string): PluginView | undefined {
    const { registry } = this.ctx;
    const instances = this.ctx.csiManager.plugins().filter((p) => p.name === id);
    const controllerReg = registry.get('csi-controller', id);
    const nodeReg = registry.get('csi-node', id);
    const cluster = this.cluster?.pluginView(id);
    // A plugin that runs only on other nodes is still the cluster's.
    if (!instances.length && !controllerReg && !nodeReg && !cluster?.instances.length) return undefined;
    const view = (info: PluginInfo | undefined): PluginInstanceView | undefined =>
      info && {
        healthy: info.healthy,
        allocId: info.allocId,
        description: info.description,
        version: info.version,
        info: fingerprintFacts(info),
        ...(isRoutedController(info.allocId) ? { routed: this.cluster?.routedView(id) ?? {} } : {}),
      };
    const controller = instances.find((p) => p.type === 'csi-controller');
    const node = instances.find((p) => p.type === 'csi-node');
    const allocs = new Set(
      [...registry.registrations('csi-controller', id), ...registry.registrations('csi-node', id)]
        .map((r) => r.allocId)
        .filter((a) => !isRoutedController(a)),
    );
    const reg = nodeReg ?? controllerReg;
    return {
      id,
      provider: reg?.options.provider,
      version: reg?.version,
      controllerRequired: !!controller?.controller?.supportsAttachDetach,
      controllersHealthy: controller?.healthy ? 1 : 0,
      controllersExpected: controllerReg ? 1 : 0,
      nodesHealthy: node?.healthy ? 1 : 0,
      nodesExpected: nodeReg ? 1 : 0,
      ...(controller ? { controller: view(controller) } : {}),
      ...(node ? { node: view(node) } : {}),
      allocs: [...allocs].sort(),
      ...(cluster ? { cluster } : {}),
    };
  }
}
