import { MemoryLogger } from '@csiplug/core';
import { openClientState } from '@csiplug/state';
import { VolumeUsageTracker } from './usage-tracker';

const rw = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };
const ro = { ...rw, readOnly: true };

describe('VolumeUsageTracker', () => {
  it('claims and frees by value, per usage, writing through to the client state', () => {
    const db = openClientState({ memory: true });
    const t = new VolumeUsageTracker(db, new MemoryLogger());
    expect(t.claim('p', 'v', 'a0', rw)).toBe(true);
    expect(t.claim('p', 'v', 'a0', { ...rw })).toBe(false);
    t.claim('p', 'v', 'a1', rw);
    t.claim('p', 'v', 'a2', ro);
    expect(db.getVolumeUsage('p', 'v').map((u) => u.allocId)).toEqual(['a0', 'a1', 'a2']);
    expect(t.free('p', 'v', 'a0', rw)).toEqual({ removed: true, remaining: ['a1'] });
    expect(t.free('p', 'v', 'a0', rw)).toEqual({ removed: false, remaining: ['a1'] });
    expect(t.free('p', 'v', 'a1', rw)).toEqual({ removed: true, remaining: [] });
    expect(t.usersWith('p', 'v', ro)).toEqual(['a2']);
    t.free('p', 'v', 'a2', ro);
    expect(db.listVolumeUsage()).toEqual([]);
  });

  it('usages that differ only in mount options share the staging path: the last of them unstages', () => {
    const db = openClientState({ memory: true });
    const t = new VolumeUsageTracker(db, new MemoryLogger());
    const noatime = { ...rw, mountOptions: { mountFlags: ['noatime'] } };
    t.claim('p', 'v', 'a0', noatime);
    t.claim('p', 'v', 'a1', rw);
    expect(t.usersWith('p', 'v', rw)).toEqual(['a0', 'a1']);
    expect(t.free('p', 'v', 'a0', noatime)).toEqual({ removed: true, remaining: ['a1'] });
    expect(t.free('p', 'v', 'a1', rw)).toEqual({ removed: true, remaining: [] });
  });

  it('is rebuilt from the client state, and changes nothing when a write fails', () => {
    const db = openClientState({ memory: true });
    new VolumeUsageTracker(db, new MemoryLogger()).claim('p', 'v', 'a0', rw);
    const t = new VolumeUsageTracker(db, new MemoryLogger());
    expect(t.usersWith('p', 'v', rw)).toEqual(['a0']);
    const put = db.putVolumeUsage.bind(db);
    db.putVolumeUsage = () => {
      throw new Error('disk full');
    };
    expect(() => t.claim('p', 'v', 'a1', rw)).toThrow('disk full');
    expect(t.usersWith('p', 'v', rw)).toEqual(['a0']);
    db.putVolumeUsage = put;
  });
});
