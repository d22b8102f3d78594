// One alloc's use of one volume, as the volume reconciler keeps it (bucket
// csi/mounts, written through before any step that depends on it runs).
//
// `desired` is what the alloc wants; claimed / staged / published are what
// this node has done — or asked for: each flag is set *before* its call
// goes out, since a call that fails or is abandoned may still have done its
// work on the plugin's side. Undoing an intent that never happened is
// harmless (every CSI node step and a release are idempotent); forgetting one
// that did would leak a mount or a claim. A "pending unmount" is simply a
// record that is desired unmounted and still has a flag set.
import { STALE_MOUNT_POLICIES, type StaleMountPolicy } from '@csiplug/core';
import type { UsageOptions } from '@csiplug/csimanager';
import { usageToFS } from '@csiplug/csimanager';

export type DesiredMountState = 'mounted' | 'unmounted';

// The stale-mount policy is core's vocabulary (the jobspec reader checks a
// volume request's on_stale_mount by it); re-exported here, where it was.
export { STALE_MOUNT_POLICIES, type StaleMountPolicy };

/** A remount of a stale mount under way: `restart` when the alloc's tasks are to be restarted once it is done. */
export type RemountIntent = 'remount' | 'restart';
export const REMOUNT_INTENTS: readonly RemountIntent[] = ['remount', 'restart'];

/**
 * The record's stale-mount policy as this agent reads it: absent is
 * `remount`, and so is a value it does not know (written by a newer agent) —
 * never a reason to drop the record (start() logs a warning for it).
 */
export function stalePolicyOf(record: Pick<VolumeMountRecord, 'onStaleMount'>): StaleMountPolicy {
  const p = record.onStaleMount;
  return p !== undefined && STALE_MOUNT_POLICIES.includes(p) ? p : 'remount';
}

/** The record's remount intent as this agent reads it: a value it does not know is `remount`. */
export function remountIntentOf(record: Pick<VolumeMountRecord, 'remounting'>): RemountIntent | undefined {
  const r = record.remounting;
  if (r === undefined) return undefined;
  return REMOUNT_INTENTS.includes(r) ? r : 'remount';
}

/** Optional fields holding a value this agent does not know (read as a default, see stalePolicyOf), for a warning. */
export function unknownFieldValues(record: VolumeMountRecord): string[] {
  const found: string[] = [];
  if (record.onStaleMount !== undefined && !STALE_MOUNT_POLICIES.includes(record.onStaleMount))
    found.push(`onStaleMount "${String(record.onStaleMount)}" (read as "remount")`);
  if (record.remounting !== undefined && !REMOUNT_INTENTS.includes(record.remounting))
    found.push(`remounting "${String(record.remounting)}" (read as "remount")`);
  return found;
}

export interface VolumeMountRecord {
  allocId: string;
  /** The group's name for the volume (`volume "name" {}`), unique per alloc. */
  name: string;
  /** The catalog id. */
  volumeId: string;
  /** The plugin's own id for the volume (CSI volume_id). */
  externalId: string;
  pluginId: string;
  usage: UsageOptions;
  desired: DesiredMountState;
  /** A claim was asked of the catalog (and the controller published, when it does). */
  claimed: boolean;
  /** From ControllerPublishVolume, handed to stage and publish. */
  publishContext?: Record<string, string>;
  /** This alloc counts as a user of the staged volume (staging path of plugin, volume and usage). */
  staged: boolean;
  /** NodePublishVolume was asked for this alloc's target path. */
  published: boolean;
  /** Host paths, once published. */
  targetPath?: string;
  stagingPath?: string;
  /** What to do when the live mount is found stale; absent (records of older agents too) means `remount`, and so does a value this agent does not know. */
  onStaleMount?: StaleMountPolicy;
  /**
   * A remount of this stale mount was started (written before its first
   * step) and not yet reported done: a next agent keeps the alloc running
   * (no restore limit), finishes it when the plugin serves, and restarts the
   * tasks under `restart`. Cleared once the remount is reported.
   */
  remounting?: RemountIntent;
  /**
   * A node-side expansion to this many bytes is owed: written before
   * NodeExpandVolume is asked, cleared once it answered; one the plugin could
   * not make online (or that failed, or an agent killed in between) is made
   * after the next publish.
   */
  expandTo?: number;
  /** Failed attempts since `desired` last changed. */
  attempts: number;
  lastError?: string;
  /** When `desired` last changed, ms since the epoch. */
  since: number;
}

/** The store key of a record: the alloc id, then the volume name escaped (it may hold any character). */
export function mountKey(allocId: string, name: string): string {
  return `${allocId}/${encodeURIComponent(name)}`;
}

/** The records sharing one staging mount: same plugin, volume and staging path (read-only, attachment and access mode). */
export function stagingKey(record: Pick<VolumeMountRecord, 'pluginId' | 'volumeId' | 'usage'>): string {
  return `${record.pluginId}\0${record.volumeId}\0${usageToFS(record.usage)}`;
}

/** Whether anything is left on the node for this record to undo. */
export function holdsAnything(record: VolumeMountRecord): boolean {
  return record.claimed || record.staged || record.published;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A shape check of a decoded record: a record that fails it is reported, not used. */
export function isVolumeMountRecord(v: unknown): v is VolumeMountRecord {
  if (!isObject(v)) return false;
  const usage = v.usage;
  return (
    typeof v.allocId === 'string' &&
    typeof v.name === 'string' &&
    typeof v.volumeId === 'string' &&
    typeof v.externalId === 'string' &&
    typeof v.pluginId === 'string' &&
    (v.desired === 'mounted' || v.desired === 'unmounted') &&
    typeof v.claimed === 'boolean' &&
    typeof v.staged === 'boolean' &&
    typeof v.published === 'boolean' &&
    typeof v.attempts === 'number' &&
    typeof v.since === 'number' &&
    // Optional fields of newer agents: any string is read (an unknown value as the default), never a reason to drop the record.
    (v.onStaleMount === undefined || typeof v.onStaleMount === 'string') &&
    (v.remounting === undefined || typeof v.remounting === 'string') &&
    (v.expandTo === undefined || typeof v.expandTo === 'number') &&
    isObject(usage) &&
    typeof usage.readOnly === 'boolean' &&
    typeof usage.attachmentMode === 'string' &&
    typeof usage.accessMode === 'string'
  );
}
