// A rule of the volume reconciler's mounts: one name per (alloc, volume).
import { ClaimError } from '../catalog/volume-claimer';
import type { VolumeMountRecord } from './mount-record';
import type { VolumeMountRequest } from './reconciler-service';

/**
 * One name per (alloc, volume): the catalog keeps one claim per alloc and
 * volume, and two usages of one volume by one alloc share its target path,
 * so undoing one name would take the other's mount and claim with it.
 */
export function checkOneNamePerVolume(records: ReadonlyMap<string, VolumeMountRecord>, key: string, request: VolumeMountRequest): void {
  const existing = records.get(key);
  if (existing && existing.volumeId !== request.volumeId) {
    throw new ClaimError(
      `alloc ${request.allocId} already has volume "${existing.volumeId}" as "${request.name}"; it cannot also mount "${request.volumeId}" under that name`,
      false,
    );
  }
  const other = [...records.entries()].find(([k, r]) => k !== key && r.allocId === request.allocId && r.volumeId === request.volumeId);
  if (other) {
    throw new ClaimError(
      `alloc ${request.allocId} already uses volume "${request.volumeId}" as "${other[1].name}"; a group may use a volume once (mount that one volume into several tasks instead)`,
      false,
    );
  }
}
