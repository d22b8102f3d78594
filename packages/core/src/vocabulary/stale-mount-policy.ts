// What to do with a volume's mount found stale after its node plugin came
// back (a volume request's `on_stale_mount`): read from a jobspec, kept in
// the volume reconciler's mount records, and acted on by the reconciler.

/**
 * What to do with a live mount found stale after its node plugin came back:
 * `remount` (stage and publish it again through the plugin), `restart`
 * (remount, then restart the alloc's tasks), `keep` (report it only).
 */
export type StaleMountPolicy = 'remount' | 'restart' | 'keep';
export const STALE_MOUNT_POLICIES: readonly StaleMountPolicy[] = ['remount', 'restart', 'keep'];
