// How an alloc uses a volume (UsageOptions), compared by value, turned into
// a path component ("ro-file-system-single-node-writer") and into the CSI
// VolumeCapability the plugin is asked for.
import { ValidationError } from '@csiplug/core';
import { type AccessMode, type VolumeCapability, blockCapability, mountCapability } from '@csiplug/csi';
/** The usage of a volume by one alloc: read-only, attachment mode, access mode (Nomad names), mount options; compared by value. */
export interface UsageOptions {
  readOnly: boolean;
  attachmentMode: string;
  accessMode: string;
  mountOptions?: { fsType?: string; mountFlags?: string[] };
}

export type AttachmentMode = 'file-system' | 'block-device';
export const ATTACHMENT_MODES: readonly AttachmentMode[] = Object.freeze(['file-system', 'block-device'] as const);

/** Nomad's access-mode names and the CSI enum value each stands for. */
export const ACCESS_MODE_TO_CSI: Readonly<Record<string, AccessMode>> = Object.freeze({
  'single-node-writer': 'SINGLE_NODE_WRITER',
  'single-node-reader-only': 'SINGLE_NODE_READER_ONLY',
  'multi-node-reader-only': 'MULTI_NODE_READER_ONLY',
  'multi-node-single-writer': 'MULTI_NODE_SINGLE_WRITER',
  'multi-node-multi-writer': 'MULTI_NODE_MULTI_WRITER',
  'single-node-single-writer': 'SINGLE_NODE_SINGLE_WRITER',
  'single-node-multi-writer': 'SINGLE_NODE_MULTI_WRITER',
});

/** The CSI access mode for a Nomad-style name; a ValidationError names the known ones. */
export function accessModeToCSI(accessMode: string): AccessMode {
  const mode = Object.prototype.hasOwnProperty.call(ACCESS_MODE_TO_CSI, accessMode) ? ACCESS_MODE_TO_CSI[accessMode] : undefined;
  if (!mode) {
    throw new ValidationError(
      `unknown volume access mode "${accessMode}"; known: ${Object.keys(ACCESS_MODE_TO_CSI).join(', ')}`,
      'accessMode',
    );
  }
  return mode;
}

/** Throws a ValidationError unless `usage` is well formed (and so safe as a path component). */
export function assertUsage(usage: UsageOptions): void {
  if (typeof usage !== 'object' || usage === null) throw new ValidationError('volume usage is required', 'usage');
  if (typeof usage.readOnly !== 'boolean') throw new ValidationError('volume usage: readOnly must be a boolean', 'readOnly');
  if (!ATTACHMENT_MODES.includes(usage.attachmentMode as AttachmentMode)) {
    throw new ValidationError(
      `unknown volume attachment mode "${String(usage.attachmentMode)}"; known: ${ATTACHMENT_MODES.join(', ')}`,
      'attachmentMode',
    );
  }
  accessModeToCSI(usage.accessMode);
  const mo = usage.mountOptions;
  if (mo !== undefined) {
    if (mo.fsType !== undefined && typeof mo.fsType !== 'string')
      throw new ValidationError('volume usage: mountOptions.fsType must be a string', 'fsType');
    if (mo.mountFlags !== undefined && (!Array.isArray(mo.mountFlags) || mo.mountFlags.some((f) => typeof f !== 'string'))) {
      throw new ValidationError('volume usage: mountOptions.mountFlags must be a list of strings', 'mountFlags');
    }
  }
}

/** The usage as one path component, e.g. `ro-file-system-single-node-writer`. */
export function usageToFS(usage: UsageOptions): string {
  assertUsage(usage);
  return `${usage.readOnly ? 'ro' : 'rw'}-${usage.attachmentMode}-${usage.accessMode}`;
}

function sameFlags(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  const x = a ?? [];
  const y = b ?? [];
  return x.length === y.length && x.every((f, i) => f === y[i]);
}

/** Value equality of two usages (mount flags compared in order). */
export function sameUsage(a: UsageOptions, b: UsageOptions): boolean {
  return (
    a.readOnly === b.readOnly &&
    a.attachmentMode === b.attachmentMode &&
    a.accessMode === b.accessMode &&
    (a.mountOptions?.fsType ?? '') === (b.mountOptions?.fsType ?? '') &&
    sameFlags(a.mountOptions?.mountFlags, b.mountOptions?.mountFlags)
  );
}

/** A plain, frozen copy: what the tracker stores and compares. */
export function copyUsage(usage: UsageOptions): UsageOptions {
  const out: UsageOptions = { readOnly: usage.readOnly, attachmentMode: usage.attachmentMode, accessMode: usage.accessMode };
  if (usage.mountOptions) {
    const mo: { fsType?: string; mountFlags?: string[] } = {};
    if (usage.mountOptions.fsType !== undefined) mo.fsType = usage.mountOptions.fsType;
    if (usage.mountOptions.mountFlags !== undefined) mo.mountFlags = [...usage.mountOptions.mountFlags];
    out.mountOptions = mo;
  }
  return out;
}

/**
 * The capability for a mount: the volume's own mount options, overridden by
 * the usage's (a non-empty fs type or flag list wins), as Nomad merges them.
 */
export function volumeCapabilityFor(
  usage: UsageOptions,
  volumeMountOptions?: { fsType?: string; mountFlags?: string[] },
): VolumeCapability {
  assertUsage(usage);
  const mode = accessModeToCSI(usage.accessMode);
  if (usage.attachmentMode === 'block-device') return blockCapability(mode);
  const fsType = usage.mountOptions?.fsType || volumeMountOptions?.fsType || '';
  const flags = usage.mountOptions?.mountFlags?.length ? usage.mountOptions.mountFlags : (volumeMountOptions?.mountFlags ?? []);
  return mountCapability(mode, { fsType, mountFlags: flags });
}
