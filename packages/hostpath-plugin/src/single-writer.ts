// SINGLE_NODE_SINGLE_WRITER on this node (CSI v1.9.0, NodePublishVolume's
// second table, which applies since the plugin reports the node capability
// SINGLE_NODE_MULTI_WRITER): the volume is published read-write at one
// target at a time, so a second read-write publication at another target is
// FAILED_PRECONDITION. Read-only publications beside it are left alone, as
// the mode's own words say ("published once as read/write") and as the CO's
// claim rules let readers join the one writer. SINGLE_NODE_MULTI_WRITER
// takes any number of read-write targets on the node. Another recorded
// target counts even when the new target resolves to the same path (a
// symlink to it): sharing the writer's mount is a second writer too.
import { type MountInfo, topMountAt } from './mountinfo';
import { sameBacking } from './rpc-checks';

/**
 * The other target where `volumeId` is published read-write on this node
 * when `mode` allows one writer and the new publication writes; undefined
 * when the publication may go ahead. `targets` are this node's recorded
 * targets of the volume; only those still mounted from the volume count.
 */
export async function otherWriterTarget(opts: {
  mode: string;
  readonly: boolean;
  target: string;
  targets: readonly string[];
  mounts: readonly MountInfo[];
  backing: { device: string; root: string } | undefined;
  resolve: (p: string) => Promise<string>;
}): Promise<string | undefined> {
  if (opts.mode !== 'SINGLE_NODE_SINGLE_WRITER' || opts.readonly) return undefined;
  for (const other of opts.targets) {
    if (other === opts.target) continue;
    const mounted = topMountAt(opts.mounts, await opts.resolve(other));
    if (sameBacking(mounted, opts.backing) && !mounted!.options.includes('ro')) return other;
  }
  return undefined;
}
