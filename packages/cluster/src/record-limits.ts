// The limits a job record read from etcd is held to: the same a submission
// is held to (an API request's body size; limits { max_allocs_per_job } of
// every node), so a record written straight into etcd — by hand, by an
// older or broken writer — can never ask a pass for more work than a `job
// run` could. A record over a limit is left out of every pass (its slots
// untouched) and said once per revision of its key.
import type { ClusterNodeView } from './node-registry';

/**
 * The most bytes a job record may take: etcd's own default limit on a
 * request (--max-request-bytes, 1.5 MiB), so no default etcd could have
 * taken a bigger one from csiplug; a submission's body is held to 1 MiB.
 */
export const MAX_JOB_RECORD_BYTES = 1_572_864;

/**
 * How many allocs one job may ask of the whole cluster: what a `job run`
 * lets through (an agent's own limits { max_allocs_per_job } times the
 * nodes it knows), taken for the most generous agent of the cluster — each
 * node's record says its limit — so no job an agent accepted is ever
 * refused here. A node whose record does not say (written by an older
 * agent) counts as `ownLimit` (the reading agent's own), or without one as
 * `perNodeCeiling` (a group's count cap).
 */
export function clusterAllocLimit(
  nodes: readonly Pick<ClusterNodeView, 'maxAllocsPerJob'>[],
  ownLimit: number | undefined,
  perNodeCeiling: number,
): number {
  const limits = nodes.map((n) => n.maxAllocsPerJob ?? ownLimit ?? perNodeCeiling);
  if (ownLimit !== undefined) limits.push(ownLimit);
  const most = limits.length ? Math.max(...limits) : perNodeCeiling;
  // A pass always knows at least its own node.
  return most * Math.max(1, nodes.length);
}
