// A task group's request for a CSI volume (`volume "name" { type = "csi" … }`):
// read from a jobspec, carried by the alloc, and mounted for its tasks by
// the csi hook (@csiplug/hooks).
import type { StaleMountPolicy } from './stale-mount-policy';

/** A group's request for a CSI volume (`volume "name" { type = "csi" … }`). */
export interface VolumeRequest {
  /** The group's name for it; tasks refer to it in `volume_mount`. */
  name: string;
  type: 'csi';
  /** The volume id in the volume catalog; with `perAlloc`, the id each alloc's own volume is named after. */
  source: string;
  /**
   * Nomad's per_alloc: each alloc mounts its own volume, `source` suffixed
   * with its index (`db[0]`, `db[1]`, … for count 3; per-alloc-volume.ts).
   * Absent: every alloc of the group mounts `source` itself.
   */
  perAlloc?: boolean;
  accessMode: string;
  attachmentMode: string;
  readOnly: boolean;
  mountOptions?: { fsType?: string; mountFlags?: string[] };
  /**
   * What to do when the mount is proven broken (a stat that hangs or answers
   * ENOTCONN or ESTALE, no longer a mount point) after its node plugin came
   * back: `remount` (default) stages and publishes it again through the
   * plugin; `restart` also restarts the alloc's tasks; `keep` only reports
   * it. A plugin's abnormal volume condition alone is only reported.
   */
  onStaleMount?: StaleMountPolicy;
}
