// Which allocs use a staged volume, per (plugin, volume), persisted write-
// through in the client state (csi/usage/<plugin>/<volume>) and rebuilt from
// it on start. That is what lets the last user — and only the last user —
// unstage a shared volume after an agent restart (Nomad keeps this in memory
// only and forgets it: hashicorp/nomad#25813). It is keyed by plugin id, not
// by plugin instance, so it also survives the plugin task restarting.
import { Logger, errorMessage } from '@csiplug/core';
import type { ClientStateDB, VolumeUsageRecord } from '@csiplug/state';
import { UsageOptions, copyUsage, sameUsage, usageToFS } from './usage';

function sharingStaging(users: readonly VolumeUsageRecord[], usage: UsageOptions): readonly VolumeUsageRecord[] {
  const dir = usageToFS(usage);
  return users.filter((u) => usageToFS(u.usage) === dir);
}

function keyOf(pluginId: string, volumeId: string): string {
  return `${pluginId}\0${volumeId}`;
}

function isRecord(r: unknown): r is VolumeUsageRecord {
  const v = r as VolumeUsageRecord;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.allocId === 'string' &&
    typeof v.usage === 'object' &&
    v.usage !== null &&
    typeof v.usage.readOnly === 'boolean' &&
    typeof v.usage.attachmentMode === 'string' &&
    typeof v.usage.accessMode === 'string'
  );
}

export interface FreeResult {
  /** Whether `allocId` was recorded with that usage. */
  removed: boolean;
  /** The allocs still using the volume with the same usage (same staging path). */
  remaining: string[];
}

export class VolumeUsageTracker {
  private readonly byVolume = new Map<string, readonly VolumeUsageRecord[]>();

  constructor(
    private readonly db: ClientStateDB,
    private readonly log: Logger,
  ) {
    this.load();
  }

  /** Reads every entry back from the client state (done on construction). */
  load(): void {
    this.byVolume.clear();
    let users = 0;
    for (const entry of this.db.listVolumeUsage()) {
      const good = (entry.users ?? []).filter((u) => {
        if (isRecord(u)) return true;
        this.log.error('usage tracker: dropping a malformed usage record', { pluginId: entry.pluginId, volumeId: entry.volumeId, record: JSON.stringify(u) });
        return false;
      });
      if (good.length === 0) continue;
      users += good.length;
      this.byVolume.set(keyOf(entry.pluginId, entry.volumeId), Object.freeze(good.map((u) => Object.freeze({ allocId: u.allocId, usage: copyUsage(u.usage) }))));
    }
    if (users > 0) this.log.info('usage tracker restored', { volumes: this.byVolume.size, users });
  }

  /** Every user of (plugin, volume), any usage. */
  users(pluginId: string, volumeId: string): VolumeUsageRecord[] {
    return [...(this.byVolume.get(keyOf(pluginId, volumeId)) ?? [])];
  }

  /**
   * The allocs that share the staging path of (plugin, volume, `usage`).
   * That path is named by read-only, attachment and access mode only, so two
   * usages differing in mount options share it — and its last user is the
   * one that unstages.
   */
  usersWith(pluginId: string, volumeId: string, usage: UsageOptions): string[] {
    return sharingStaging(this.users(pluginId, volumeId), usage).map((u) => u.allocId);
  }

  /** Records that `allocId` uses the volume with `usage`, persisted before it returns. Returns false if it was recorded already. */
  claim(pluginId: string, volumeId: string, allocId: string, usage: UsageOptions): boolean {
    const list = this.byVolume.get(keyOf(pluginId, volumeId)) ?? [];
    if (list.some((u) => u.allocId === allocId && sameUsage(u.usage, usage))) return false;
    this.write(pluginId, volumeId, [...list, Object.freeze({ allocId, usage: copyUsage(usage) })]);
    return true;
  }

  /** Forgets `allocId`'s use of the volume with `usage`, persisted before it returns. */
  free(pluginId: string, volumeId: string, allocId: string, usage: UsageOptions): FreeResult {
    const list = this.byVolume.get(keyOf(pluginId, volumeId)) ?? [];
    const next = list.filter((u) => !(u.allocId === allocId && sameUsage(u.usage, usage)));
    const removed = next.length !== list.length;
    if (removed) this.write(pluginId, volumeId, next);
    return { removed, remaining: sharingStaging(next, usage).map((u) => u.allocId) };
  }

  /** Every (plugin, volume) with users. */
  entries(): { pluginId: string; volumeId: string; users: VolumeUsageRecord[] }[] {
    return [...this.byVolume.entries()].map(([k, users]) => {
      const [pluginId, volumeId] = k.split('\0') as [string, string];
      return { pluginId, volumeId, users: [...users] };
    });
  }

  private write(pluginId: string, volumeId: string, next: readonly VolumeUsageRecord[]): void {
    try {
      this.db.putVolumeUsage(pluginId, volumeId, next.map((u) => ({ allocId: u.allocId, usage: copyUsage(u.usage) })));
    } catch (err) {
      this.log.error('usage tracker: could not persist volume usage; nothing changed', { pluginId, volumeId, error: errorMessage(err) });
      throw err;
    }
    const k = keyOf(pluginId, volumeId);
    if (next.length === 0) this.byVolume.delete(k);
    else this.byVolume.set(k, Object.freeze([...next]));
  }
}
