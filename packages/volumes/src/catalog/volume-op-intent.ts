// The volume catalog's operation intents (bucket csi/volume-ops, one per
// volume id): what a create, expand or delete is about to ask of the
// controller plugin, written *before* the call goes out and removed once its
// outcome is recorded — as the mount records do for node steps
// (reconciler/mount-record.ts). An agent killed between the two leaves the
// intent; the next one finishes or undoes the operation from it
// (volume-op-resumer.ts), so the catalog and the plugin cannot stay apart:
//
//   create  CreateVolume again under the same name (CSI: idempotent by name)
//           and the volume recorded — or, for an intent marked `undo` (the
//           caller was told the create failed), left on the plugin and
//           reported: never deleted, since a name that comes from the id
//           alone may find storage a deregister kept on purpose;
//   expand  ControllerExpandVolume to the same size again (idempotent) and
//           the new capacity recorded;
//   delete  the volume is not schedulable and refuses claims from the moment
//           its intent is written; DeleteVolume again (NOT_FOUND is done)
//           and the record removed.
import { CSIError, GrpcStatus, type CreateVolumeRequest } from '@csiplug/csi';
import type { DecodeFailure, VolumeStateStore } from '@csiplug/state';
import { PERMANENT_CSI_CODES } from './register-check';
import type { VolumeSpec } from './volume-spec';

interface IntentBase {
  volumeId: string;
  pluginId: string;
  /** When the intent was written, ms since the epoch. */
  since: number;
}

export interface CreateIntent extends IntentBase {
  op: 'create';
  /** The spec as the catalog checked it: what the volume's record is made from. */
  spec: VolumeSpec;
  /** The CreateVolume request as sent (its name makes the retry find the same volume). */
  request: CreateVolumeRequest;
  /** The caller was told the create failed, but the plugin may have made it: the next pass leaves it on the plugin and says so (a create of the id again takes it up). */
  undo?: true;
}

export interface ExpandIntent extends IntentBase {
  op: 'expand';
  externalId: string;
  /** The capacity the catalog had when the expand was asked. */
  fromBytes: number;
  /** capacity_min asked: the controller's required_bytes. */
  toBytes: number;
  /** capacity_max asked, if any: the controller's limit_bytes. */
  limitBytes?: number;
}

export interface DeleteIntent extends IntentBase {
  op: 'delete';
  externalId: string;
}

export type VolumeOpIntent = CreateIntent | ExpandIntent | DeleteIntent;
export type VolumeOp = VolumeOpIntent['op'];

/** What surfaces may show of an interrupted operation on a volume. */
export interface VolumeOpView {
  op: VolumeOp;
  since: number;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A shape check of a decoded intent: one that fails it is reported, not acted on. */
export function isVolumeOpIntent(v: unknown): v is VolumeOpIntent {
  if (!isObject(v) || typeof v.volumeId !== 'string' || typeof v.pluginId !== 'string' || typeof v.since !== 'number') return false;
  switch (v.op) {
    case 'create':
      return isObject(v.spec) && isObject(v.request) && typeof v.request.name === 'string';
    case 'expand':
      return (
        typeof v.externalId === 'string' &&
        typeof v.fromBytes === 'number' &&
        typeof v.toBytes === 'number' &&
        (v.limitBytes === undefined || typeof v.limitBytes === 'number')
      );
    case 'delete':
      return typeof v.externalId === 'string';
    default:
      return false;
  }
}

/** CSI codes that say the plugin did not do what was asked (its own refusal, before any work). */
const REFUSED_CODES: readonly number[] = Object.freeze([
  ...PERMANENT_CSI_CODES,
  GrpcStatus.FAILED_PRECONDITION,
  GrpcStatus.RESOURCE_EXHAUSTED,
]);

/**
 * Whether a failed call may still have done its work on the plugin's side:
 * anything but a call the client never sent or the plugin's own refusal
 * (a deadline, a dropped connection, an abort, UNAVAILABLE, INTERNAL…).
 */
export function mayHaveHappened(err: unknown): boolean {
  if (!(err instanceof CSIError)) return true;
  if (err.local) return false;
  return !REFUSED_CODES.includes(err.grpcCode);
}

/** The intents in the client state: one per volume id, written through before any call that depends on it. */
export class VolumeOpIntents {
  constructor(private readonly state: VolumeStateStore) {}

  put(intent: VolumeOpIntent): void {
    this.state.putVolumeOp(intent.volumeId, intent);
  }

  /** The volume's intent; undefined when there is none or it cannot be read (list() reports those). */
  get(volumeId: string): VolumeOpIntent | undefined {
    let raw: unknown;
    try {
      raw = this.state.getVolumeOp<unknown>(volumeId);
    } catch {
      return undefined;
    }
    return isVolumeOpIntent(raw) ? raw : undefined;
  }

  delete(volumeId: string): void {
    this.state.deleteVolumeOp(volumeId);
  }

  /** Every readable intent, and the keys of those that are not (undecodable, or a shape this agent does not know). */
  list(): { intents: VolumeOpIntent[]; failures: DecodeFailure[] } {
    const { records, failures } = this.state.listVolumeOps<unknown>();
    const intents: VolumeOpIntent[] = [];
    const bad = [...failures];
    for (const { key, record } of records) {
      if (isVolumeOpIntent(record)) intents.push(record);
      else bad.push({ key, error: `csi/volume-ops/${key} is not a volume operation intent this agent knows` });
    }
    return { intents, failures: bad };
  }
}
