// `csiplug node purge NODE` (Nomad's `nomad node purge`): an operator says a
// down node is gone for good. Its claims are released — what was published
// to it unpublished first, through a controller of the plugin, as when its
// disconnect grace ends — and its record removed, so its name is free for
// another machine (node-identity.ts: a name whose record is another
// identity's is refused while it holds claims or placements). A live node is
// never purged: every step requires its alive key to be absent. Its slots
// stay until the passes move them (a node with no record is down).
import { CsiplugError } from '@csiplug/core';
import type { ClusterClaim } from './claims';
import type { ClusterVolumeClaimer } from './cluster-claimer';
import type { ClusterMembership } from './membership';

/** What `node purge` did: the node's name, its identity (when its record named one), and the volumes whose claims it released. */
export interface PurgedNode {
  name: string;
  identity?: string;
  releasedVolumes: string[];
}

/** `node purge` refused: the node is live, unknown, or what was published to it cannot be unpublished from this agent. */
export class NodePurgeError extends CsiplugError {}

/** No node of that name in the cluster (the API answers 404, by the code's shape). */
export class NodePurgeNotFoundError extends NodePurgeError {
  constructor(message: string) {
    super('ENODE_NOT_FOUND', message);
  }
}

/** The node is live, or came back, or what was published to it cannot be unpublished from here (the API answers 409). */
export class NodePurgeRefusedError extends NodePurgeError {
  constructor(message: string) {
    super('ENODE_PURGE_REFUSED', message);
  }
}

/**
 * Purges the node `name`. `unpublishFrom` unpublishes what was published to
 * it (false: this agent cannot, e.g. it has no controller of the plugin).
 * Throws NodePurgeError; an etcd that does not answer throws its own error.
 */
export async function purgeClusterNode(
  membership: ClusterMembership,
  claimer: ClusterVolumeClaimer,
  name: string,
  unpublishFrom: (node: string, published: Array<{ volumeId: string; claim: ClusterClaim }>) => Promise<boolean>,
): Promise<PurgedNode> {
  const node = (await membership.list()).find((n) => n.name === name);
  if (!node)
    throw new NodePurgeNotFoundError(
      `node "${name}" is not in the cluster (no record under that name); \`csiplug node status\` lists the nodes`,
    );
  if (node.status === 'ready') {
    throw new NodePurgeRefusedError(
      `node "${name}" (identity ${node.identity ?? 'unknown'}) is ready: its agent holds it now, and a live node is never purged; stop that agent first (or give the other machine its own cluster.node_name)`,
    );
  }
  const published = await claimer.publishedTo(name);
  if (published.length && !(await unpublishFrom(name, published))) {
    throw new NodePurgeRefusedError(
      `node "${name}": volumes published to it (${published.map((p) => p.volumeId).join(', ')}) could not be unpublished from this agent (no controller of their plugin here, or the node came back); ` +
        'nothing was changed: run `node purge` against an agent with a controller of the plugin',
    );
  }
  // Each release requires the node's alive key to be absent: a node back meanwhile keeps what it holds.
  const releasedVolumes = await claimer.releaseNode(name);
  const removed = await membership.purgeRecord(name);
  if (removed === 'alive')
    throw new NodePurgeRefusedError(
      `node "${name}" came back while it was purged: it keeps its record and its claims; stop its agent first`,
    );
  return { name, ...(removed?.identity ? { identity: removed.identity } : {}), releasedVolumes };
}
