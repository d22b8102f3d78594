// clusterModule: @csiplug/cluster as one Module, for an agent in a cluster
// (config `cluster { … }`). Register binds the node (IClusterNode) and makes
// the cluster volume claimer the IVolumeClaimer — claims are taken in etcd
// first, then by the local catalog — before the volumes module registers
// its default (the local catalog alone): list it before volumesModule.
// Start reads the node's identity from the data dir and connects to etcd
// (the agent has locked the data dir; nothing waits for etcd): before the
// volumes module starts, whose reconciler may release a claim at once.
// Stop lets the node's lease run out and closes the connection.
import { bind, declareTokenOwner, type Module } from '@csiplug/core';
import { IVolumeClaimer } from '@csiplug/volumes';
import { ClusterNode, type ClusterNodeConfig } from './cluster-node';
import { IClusterNode } from './tokens';

export const clusterModule: Module<ClusterNodeConfig> = {
  name: 'cluster',
  register: (container, config) => {
    const node = new ClusterNode(config, container);
    bind(container, IClusterNode, { useValue: node });
    bind(container, IVolumeClaimer, { useFactory: () => node.claimer });
  },
  start: (container) => container.resolve<ClusterNode>(IClusterNode).open(),
  stop: (container) => container.resolve<ClusterNode>(IClusterNode).close(),
};

// IVolumeClaimer stays the volumes module's to name: it binds the default every agent has.
declareTokenOwner({ name: 'cluster', exportName: 'clusterModule', packageName: '@csiplug/cluster' }, [IClusterNode]);
