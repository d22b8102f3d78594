// clusterModule: @csiplug/cluster as one Module, for an agent in a cluster
// (config `cluster { … }`). Register binds the node (IClusterNode), makes
// the cluster volume claimer the IVolumeClaimer — claims are taken in etcd
// first, then by the local catalog — before the volumes module registers
// its default (the local catalog alone): list it before volumesModule; and
// binds cluster mode (IClusterMode: the node's share of the cluster's jobs,
// routed controllers, the cluster's volume operations), made on its first
// resolve over what the agent bound to IClusterAgent.
// Start reads the node's identity from the data dir and connects to etcd
// (the agent has locked the data dir; nothing waits for etcd): before the
// volumes module starts, whose reconciler may release a claim at once.
// Cluster mode's own start (joining, passes, routed controllers) waits until
// the agent has restored its allocs, and its passes stop before the agent's
// runners do: the agent calls ClusterMode.start/stopPasses/stopControllers at
// those moments. Stop stops cluster mode if that was not done (a start cut
// short), lets the node's lease run out and closes the connection.
import { bind, declareTokenOwner, type Module } from '@csiplug/core';
import { IVolumeClaimer } from '@csiplug/volumes';
import type { DependencyContainer } from 'tsyringe';
import { ClusterNode, type ClusterNodeConfig } from './cluster-node';
import { ClusterMode } from './mode/cluster-mode';
import { IClusterAgent, IClusterMode, IClusterNode } from './tokens';

/** Cluster mode once made, so that stop never makes it (its parts' modules have stopped by then). */
const MadeClusterMode: unique symbol = Symbol('MadeClusterMode');
type MadeClusterMode = { mode?: ClusterMode };

export const clusterModule: Module<ClusterNodeConfig> = {
  name: 'cluster',
  register: (container, config) => {
    const node = new ClusterNode(config, container);
    const made: MadeClusterMode = {};
    bind(container, IClusterNode, { useValue: node });
    bind(container, IVolumeClaimer, { useFactory: () => node.claimer });
    bind(container, MadeClusterMode, { useValue: made });
    bind(container, IClusterMode, { useFactory: (c) => (made.mode = new ClusterMode(c.resolve<IClusterAgent>(IClusterAgent), node)) });
  },
  start: (container) => container.resolve<ClusterNode>(IClusterNode).open(),
  stop: async (container) => {
    await stopClusterMode(container);
    await container.resolve<ClusterNode>(IClusterNode).close();
  },
};

/** Cluster mode's passes and routed controllers stopped, when it was made (each a no-op when the agent stopped it already). */
async function stopClusterMode(container: DependencyContainer): Promise<void> {
  const { mode } = container.resolve<MadeClusterMode>(MadeClusterMode);
  if (!mode) return;
  await mode.stopPasses();
  await mode.stopControllers();
}

// IVolumeClaimer stays the volumes module's to name: it binds the default every agent has.
// IClusterAgent is the agent's to bind (its composition root, before it resolves IClusterMode).
declareTokenOwner({ name: 'cluster', exportName: 'clusterModule', packageName: '@csiplug/cluster' }, [IClusterNode, IClusterMode]);
