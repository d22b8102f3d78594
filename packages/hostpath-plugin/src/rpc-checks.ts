// The hostpath plugin's checks and small answers shared by its RPCs: which
// capabilities and mount flags a node-local directory honours, required
// fields, capacity ranges, paging, content sources and the error a failed
// data command becomes. Split from plugin.ts, which serves the RPCs.
import * as path from 'node:path';
import { ACCESS_MODES, type AccessMode, type VolumeCapability__Output, accessTypeOf, csiStatus } from '@csiplug/csi';
import { DataCommandError } from './errors';
import type { MountInfo } from './mountinfo';
import type { ContentSourceRecord } from './volume-store';

/** Access modes a node-local directory can honour. */
export const SUPPORTED_MODES: readonly AccessMode[] = [
  'SINGLE_NODE_WRITER',
  'SINGLE_NODE_READER_ONLY',
  'SINGLE_NODE_SINGLE_WRITER',
  'SINGLE_NODE_MULTI_WRITER',
];
export const READ_ONLY_MODES: readonly string[] = ['SINGLE_NODE_READER_ONLY', 'MULTI_NODE_READER_ONLY'];
/** Mount flags that make sense on a bind mount and are applied on remount. */
export const SUPPORTED_FLAGS: readonly string[] = ['ro', 'rw', 'noexec', 'nosuid', 'nodev', 'noatime', 'nodiratime', 'relatime'];

export type Cap = VolumeCapability__Output | null | undefined;

export function requireField(value: unknown, field: string, rpc: string): asserts value is string {
  if (typeof value !== 'string' || value === '') throw csiStatus.invalidArgument(`${rpc}: ${field} is required`);
}

export function requireAbsolute(p: string, field: string, rpc: string): string {
  if (!path.isAbsolute(p)) throw csiStatus.invalidArgument(`${rpc}: ${field} must be an absolute path, got "${p}"`);
  // Without a trailing separator: "/t/a/" is "/t/a" (a retry may write either), "/" stays "/".
  const normal = path.normalize(p);
  return normal.length > 1 ? normal.replace(/\/+$/, '') : normal;
}

/** Why the plugin cannot serve `cap`; undefined when it can. Malformed capabilities are INVALID_ARGUMENT. */
export function unsupported(cap: Cap, rpc: string): string | undefined {
  if (!cap) throw csiStatus.invalidArgument(`${rpc}: volume_capability is required`);
  const type = accessTypeOf(cap);
  if (!type) throw csiStatus.invalidArgument(`${rpc}: volume_capability must set exactly one access type (mount or block)`);
  const mode = String(cap.accessMode?.mode ?? 'UNKNOWN');
  if (!ACCESS_MODES.includes(mode as AccessMode)) throw csiStatus.invalidArgument(`${rpc}: volume_capability.access_mode is required`);
  if (type === 'block') return 'block access is not supported: hostpath volumes are directories';
  if (!SUPPORTED_MODES.includes(mode as AccessMode))
    return `access mode ${mode} is not supported: hostpath volumes live on one node (supported: ${SUPPORTED_MODES.join(', ')})`;
  if (cap.mount?.fsType)
    return `fs type "${cap.mount.fsType}" is not supported: hostpath volumes are bind mounts of directories (leave fs_type empty)`;
  const bad = (cap.mount?.mountFlags ?? []).filter((f) => !SUPPORTED_FLAGS.includes(f));
  if (bad.length) return `mount flags ${bad.join(', ')} are not supported (supported: ${SUPPORTED_FLAGS.join(', ')})`;
  if (cap.mount?.volumeMountGroup) return 'volume_mount_group is not supported';
  return undefined;
}

/** A capacity_range as bigints; negative values are INVALID_ARGUMENT, required above limit OUT_OF_RANGE. */
export function capacityRange(
  range: { requiredBytes?: string; limitBytes?: string } | null | undefined,
  rpc: string,
): { required: bigint; limit: bigint } {
  const required = BigInt(range?.requiredBytes || '0');
  const limit = BigInt(range?.limitBytes || '0');
  if (required < 0n || limit < 0n) throw csiStatus.invalidArgument(`${rpc}: capacity_range values must not be negative`);
  if (limit > 0n && required > limit) throw csiStatus.outOfRange(`${rpc}: required_bytes ${required} exceeds limit_bytes ${limit}`);
  return { required, limit };
}

/** One page of `all` for a List* call: starting_token is the index to start at (an invalid one is ABORTED). */
export function page<T>(
  all: readonly T[],
  req: { maxEntries: number; startingToken: string },
  rpc: string,
): { items: T[]; nextToken: string } {
  let start = 0;
  if (req.startingToken) {
    start = /^\d+$/.test(req.startingToken) ? Number(req.startingToken) : -1;
    if (!Number.isSafeInteger(start) || start < 0 || start > all.length)
      throw csiStatus.aborted(`${rpc}: starting_token "${req.startingToken}" is not valid; start again without one`);
  }
  if (req.maxEntries < 0) throw csiStatus.invalidArgument(`${rpc}: max_entries must not be negative`);
  const end = req.maxEntries > 0 ? Math.min(all.length, start + req.maxEntries) : all.length;
  return { items: all.slice(start, end), nextToken: end < all.length ? String(end) : '' };
}

export function byCreation(a: { createdAt: string; id: string }, b: { createdAt: string; id: string }): number {
  return a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id);
}

export function showTopology(segments: Record<string, string> | null | undefined): string {
  return `{${Object.entries(segments ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(', ')}}`;
}

/** The content source of a CreateVolume request; a source without its id is INVALID_ARGUMENT. */
export function contentSourceOf(src: CreateVolumeContentSource, rpc: string): ContentSourceRecord | undefined {
  if (!src) return undefined;
  if (src.snapshot) {
    if (!src.snapshot.snapshotId) throw csiStatus.invalidArgument(`${rpc}: volume_content_source.snapshot.snapshot_id is required`);
    return { type: 'snapshot', id: src.snapshot.snapshotId };
  }
  if (src.volume) {
    if (!src.volume.volumeId) throw csiStatus.invalidArgument(`${rpc}: volume_content_source.volume.volume_id is required`);
    return { type: 'volume', id: src.volume.volumeId };
  }
  throw csiStatus.invalidArgument(`${rpc}: volume_content_source must name a snapshot or a volume`);
}

export type CreateVolumeContentSource =
  { snapshot?: { snapshotId: string } | null; volume?: { volumeId: string } | null } | null | undefined;

export function describeSource(s: ContentSourceRecord | undefined): string {
  return s ? `${s.type} "${s.id}"` : 'no content source';
}

/** A tar/cp failure as the status the caller gets: out of space is RESOURCE_EXHAUSTED, anything else INTERNAL. */
export function dataFailure(err: unknown, rpc: string, what: string): Error {
  if (err instanceof DataCommandError) {
    return err.noSpace
      ? csiStatus.resourceExhausted(`${rpc}: not enough space to ${what}: ${err.message}`)
      : csiStatus.internal(`${rpc}: cannot ${what}: ${err.message}`);
  }
  return err instanceof Error ? err : new Error(String(err));
}

/** An optional capability (the expand RPCs): INVALID_ARGUMENT when given and not one the plugin can serve. */
export function refuseUnsupported(cap: Cap, rpc: string): void {
  if (!cap) return;
  const why = unsupported(cap, rpc);
  if (why) throw csiStatus.invalidArgument(`${rpc}: ${why}`);
}

export function sameBacking(m: MountInfo | undefined, want: { device: string; root: string } | undefined): boolean {
  return !!m && !!want && m.device === want.device && m.root === want.root;
}
