// What a register of a volume the catalog has may change, and each refusal
// in its words (Nomad's CSIVolume.Merge rules).
import { ValidationError } from '@csiplug/core';
import { VolumeUpdateRefusedError } from './errors';
import { externalIdToRegister, mergeRegistered, registerUpdateGrowth } from './register-update';
import type { VolumeRecord } from './volume-record';
import type { VolumeSpec } from './volume-spec';

function record(over: Partial<VolumeRecord> = {}): VolumeRecord {
  return {
    id: 'data',
    name: 'data',
    type: 'csi',
    pluginId: 'hp',
    externalId: 'ext-data',
    capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }],
    mountOptions: { fsType: 'ext4', mountFlags: ['noatime'] },
    parameters: { pool: 'fast' },
    secrets: { userKey: 'old-key' },
    context: { zone: 'a' },
    claims: [],
    createdAt: 1,
    ...over,
  };
}

function spec(over: Partial<VolumeSpec> = {}): VolumeSpec {
  return {
    id: 'data',
    name: 'data',
    type: 'csi',
    pluginId: 'hp',
    externalId: 'ext-data',
    capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }],
    mountOptions: { fsType: 'ext4', mountFlags: ['noatime'] },
    parameters: { pool: 'fast' },
    secrets: { userKey: 'new-key' },
    context: {},
    ...over,
  };
}

const CLAIM = { allocId: 'a1', mode: 'write' as const, accessMode: 'single-node-writer', attachmentMode: 'file-system', since: 5 };

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof VolumeUpdateRefusedError) return err.message;
    throw err;
  }
  throw new Error('expected the update to be refused');
}

describe('mergeRegistered', () => {
  test('while claimed: secrets replaced, context replaced when given, capabilities replaced keeping the mode in use; claims and publishes kept', () => {
    const existing = record({ claims: [CLAIM], controllerPublished: { a1: 'node-1' }, publishContexts: { a1: { dev: '/dev/x' } } });
    const next = mergeRegistered(
      existing,
      spec({
        context: { zone: 'b' },
        capabilities: [
          { accessMode: 'single-node-writer', attachmentMode: 'file-system' },
          { accessMode: 'single-node-reader-only', attachmentMode: 'file-system' },
        ],
      }),
    );
    expect(next.secrets).toEqual({ userKey: 'new-key' });
    expect(next.context).toEqual({ zone: 'b' });
    expect(next.capabilities).toHaveLength(2);
    expect(next.claims).toEqual([CLAIM]);
    expect(next.controllerPublished).toEqual({ a1: 'node-1' });
    expect(next.publishContexts).toEqual({ a1: { dev: '/dev/x' } });
    expect(next.createdAt).toBe(1);
    // The record given is not changed: the catalog writes the new one only once the plugin has checked it.
    expect(existing.secrets).toEqual({ userKey: 'old-key' });
  });

  test('no context given keeps the stored one; no external id, no parameters and the defaulted name are no change', () => {
    const given = spec({ parameters: {} });
    delete given.externalId;
    const next = mergeRegistered(record(), given);
    expect(next.context).toEqual({ zone: 'a' });
    expect(next.externalId).toBe('ext-data');
    expect(next.parameters).toEqual({ pool: 'fast' });
    expect(mergeRegistered(record({ name: 'Data volume' }), spec({ name: 'data' })).name).toBe('Data volume');
  });

  test('mount options change only while unclaimed', () => {
    expect(mergeRegistered(record(), spec({ mountOptions: { mountFlags: ['ro'] } })).mountOptions).toEqual({ mountFlags: ['ro'] });
    expect(refusal(() => mergeRegistered(record({ claims: [CLAIM] }), spec({ mountOptions: { mountFlags: ['ro'] } })))).toBe(
      'volume "data" is registered already and cannot be updated as asked: its mount options cannot change while it is in use (claimed by a1); stop the allocs first',
    );
  });

  test('a capability a claim holds cannot go', () => {
    expect(
      refusal(() =>
        mergeRegistered(
          record({ claims: [CLAIM] }),
          spec({ capabilities: [{ accessMode: 'multi-node-reader-only', attachmentMode: 'file-system' }] }),
        ),
      ),
    ).toBe(
      'volume "data" is registered already and cannot be updated as asked: its capabilities must keep the modes in use: single-node-writer/file-system (alloc a1); add it back as a capability, or stop the alloc first',
    );
    // Unclaimed, any capabilities go.
    const free = mergeRegistered(
      record(),
      spec({ capabilities: [{ accessMode: 'multi-node-reader-only', attachmentMode: 'file-system' }] }),
    );
    expect(free.capabilities).toEqual([{ accessMode: 'multi-node-reader-only', attachmentMode: 'file-system' }]);
  });

  test('plugin, external id, name, parameters, snapshot and clone ids and a set topology cannot change: every reason at once', () => {
    const message = refusal(() =>
      mergeRegistered(
        record({ accessibleTopology: [{ segments: { rack: 'r1' } }], topologyRequest: { required: [{ segments: { rack: 'r1' } }] } }),
        spec({
          pluginId: 'other',
          externalId: 'ext-other',
          name: 'Other',
          parameters: { pool: 'slow' },
          snapshotId: 'snap-1',
          topologyRequest: { required: [{ segments: { rack: 'r2' } }] },
        }),
      ),
    );
    expect(message).toBe(
      'volume "data" is registered already and cannot be updated as asked: ' +
        'its plugin cannot change (it is "hp", the spec says "other"); ' +
        'its external id cannot change (it is "ext-data", the spec says "ext-other"); ' +
        'its name cannot change (it is "data", the spec says "Other"); ' +
        'its snapshot_id cannot change (it is not set, the spec says "snap-1"); ' +
        'its topology request cannot change once the volume has a topology; give the topology_request it was registered with; ' +
        'its parameters cannot change; give the parameters it has, or none',
    );
  });
});

describe("mergeRegistered: topology, mount flags, capacity (as Nomad's Merge)", () => {
  test('a volume without a topology keeps none: a topology request in the update is ignored, as Merge ignores it', () => {
    const next = mergeRegistered(record(), spec({ topologyRequest: { required: [{ segments: { rack: 'r1' } }] } }));
    expect(next.topologyRequest).toBeUndefined();
    expect(next.accessibleTopology).toBeUndefined();
  });

  test('mount flags are a set: the same flags in another order are no change while claimed', () => {
    const existing = record({ claims: [CLAIM], mountOptions: { fsType: 'ext4', mountFlags: ['noatime', 'nodev'] } });
    expect(mergeRegistered(existing, spec({ mountOptions: { fsType: 'ext4', mountFlags: ['nodev', 'noatime'] } })).mountOptions).toEqual({
      fsType: 'ext4',
      mountFlags: ['noatime', 'nodev'],
    });
    expect(refusal(() => mergeRegistered(existing, spec({ mountOptions: { fsType: 'ext4', mountFlags: ['nodev', 'ro'] } })))).toContain(
      'its mount options cannot change while it is in use (claimed by a1)',
    );
  });

  test('the capacity range asked for is recorded: another capacity_max, a lower capacity_min; neither grows the volume', () => {
    const existing = record({ capacityBytes: 2000, capacityMin: 2000 });
    const maxOnly = mergeRegistered(existing, spec({ capacityMax: 9000 }));
    expect(maxOnly).toMatchObject({ capacityBytes: 2000, capacityMin: 2000, capacityMax: 9000 });
    expect(registerUpdateGrowth(existing, spec({ capacityMax: 9000 }))).toBeUndefined();
    const lowerMin = mergeRegistered(existing, spec({ capacityMin: 1000 }));
    expect(lowerMin).toMatchObject({ capacityBytes: 2000, capacityMin: 1000 });
    expect(registerUpdateGrowth(existing, spec({ capacityMin: 1000 }))).toBeUndefined();
    expect(registerUpdateGrowth(existing, spec({ capacityMin: 2000 }))).toBeUndefined();
    expect(registerUpdateGrowth(existing, spec({ capacityMin: 3000 }))).toBe(3000);
  });

  test('a capacity_max below capacity_min or below the capacity the volume has is refused', () => {
    const existing = record({ capacityBytes: 2000 });
    expect(refusal(() => mergeRegistered(existing, spec({ capacityMax: 1500 })))).toBe(
      'volume "data" is registered already and cannot be updated as asked: its capacity_max 1500 is below the 2000 bytes it has: volumes only grow; give a capacity_max of at least 2000',
    );
    expect(refusal(() => mergeRegistered(existing, spec({ capacityMin: 5000, capacityMax: 4000 })))).toContain(
      'its capacity_max 4000 is below its capacity_min 5000; give a capacity_max at or above capacity_min',
    );
  });
});

describe('externalIdToRegister', () => {
  test('required for a new volume, optional for one there is', () => {
    const given = spec();
    delete given.externalId;
    expect(() => externalIdToRegister(given, undefined)).toThrow(ValidationError);
    expect(() => externalIdToRegister(given, undefined)).toThrow(/external_id is required to register an existing volume/);
    expect(externalIdToRegister(given, record())).toBe('ext-data');
    expect(externalIdToRegister(spec(), undefined)).toBe('ext-data');
  });
});
