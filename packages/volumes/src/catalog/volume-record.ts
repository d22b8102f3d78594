// How a catalogued volume is kept in the client state (`volumes/<id>`, JSON):
// its VolumeView without the read-time `schedulable` flag, plus which claims
// the controller published and to which node (needed to unpublish them even
// after the node plugin is gone).
import type { CreateVolumeResponse } from '@csiplug/csi';
import type { ClaimableVolume } from './volume-claimer';
import { topologiesOf } from './topology';
import type { VolumeSpec } from './volume-spec';
import type { VolumeView } from './volume-view';

export interface VolumeRecord extends Omit<VolumeView, 'schedulable'> {
  /** Expanded with node_expansion_required: every mount of the volume runs NodeExpandVolume to this size after its publish (kept: NodeExpandVolume is idempotent). */
  nodeExpandTo?: number;
  /** alloc id → the node id ControllerPublishVolume was called with; an entry exists while that claim is published. */
  controllerPublished?: Record<string, string>;
  /**
   * alloc id → node id of a ControllerPublishVolume asked for and not yet
   * answered (or cut short): recorded before the call, so a release
   * unpublishes what may have attached.
   */
  publishing?: Record<string, string>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A light shape check of a decoded record: enough that the catalog can work with it. */
export function isVolumeRecord(v: unknown): v is VolumeRecord {
  return (
    isObject(v) &&
    typeof v.id === 'string' &&
    typeof v.pluginId === 'string' &&
    typeof v.externalId === 'string' &&
    Array.isArray(v.capabilities) &&
    Array.isArray(v.claims)
  );
}

/** The view served to surfaces: a copy, without the catalog's bookkeeping. */
export function toVolumeView(record: VolumeRecord, schedulable: boolean): VolumeView {
  const { controllerPublished: _published, publishing: _publishing, nodeExpandTo: _owed, ...rest } = structuredClone(record);
  const view: VolumeView = { ...rest, schedulable };
  if (view.publishContexts && Object.keys(view.publishContexts).length === 0) delete view.publishContexts;
  return view;
}

/** What the csi hook needs to mount the volume. */
export function toClaimable(record: VolumeRecord): ClaimableVolume {
  const out: ClaimableVolume = { id: record.id, externalId: record.externalId, pluginId: record.pluginId };
  if (Object.keys(record.secrets ?? {}).length > 0) out.secrets = { ...record.secrets };
  if (Object.keys(record.context ?? {}).length > 0) out.context = { ...record.context };
  if (record.nodeExpandTo !== undefined) out.nodeExpandTo = record.nodeExpandTo;
  if (record.mountOptions) {
    out.mountOptions = {
      ...(record.mountOptions.fsType !== undefined ? { fsType: record.mountOptions.fsType } : {}),
      ...(record.mountOptions.mountFlags !== undefined ? { mountFlags: [...record.mountOptions.mountFlags] } : {}),
    };
  }
  return out;
}

/** The record of a volume CreateVolume made from `spec` (`created` has its volume id; the caller checks that). */
export function recordOfCreated(spec: VolumeSpec, created: NonNullable<CreateVolumeResponse['volume']>, now: number): VolumeRecord {
  const record: VolumeRecord = {
    ...spec,
    externalId: created.volumeId,
    context: { ...spec.context, ...(created.volumeContext ?? {}) },
    claims: [],
    createdAt: now,
  };
  const capacity = Number(created.capacityBytes);
  if (Number.isFinite(capacity) && capacity > 0) record.capacityBytes = capacity;
  const reachable = topologiesOf(created.accessibleTopology);
  if (reachable) record.accessibleTopology = reachable;
  return record;
}
