// The plugin's view of the mount table: the parser and queries are
// @csiplug/core's (one mountinfo reader for every package); this file keeps
// the names the plugin and its users import, and the plugin's one query of
// its own, mountsUnder's unmount order.
import { type MountInfoEntry, mountPointsUnder } from '@csiplug/core';

export { backingOf, parseMountInfo, readMountInfo, topMountAt } from '@csiplug/core';

/** One mountinfo entry (see @csiplug/core's MountInfoEntry). */
export type MountInfo = MountInfoEntry;

/** Every mount point at or below `dir`, newest first (mountinfo lists in mount order): the order to unmount them. */
export function mountsUnder(mounts: readonly MountInfo[], dir: string): string[] {
  return mountPointsUnder(mounts, dir).reverse();
}
