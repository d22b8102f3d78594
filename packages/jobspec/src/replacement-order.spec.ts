// In which order an alloc gives way to its replacement.
import { makeJob, type GroupOptions } from './testing';
import type { GroupSpec } from './model';
import { replacementOrder } from './replacement-order';

const group = (o: GroupOptions): GroupSpec => makeJob('j', { g: o }).groups[0]!;

describe('replacementOrder', () => {
  it("starts a plugin group's new alloc before the old one stops", () => {
    const order = replacementOrder(group({ plugin: 'hostpath' }), group({ plugin: 'hostpath', env: { A: '1' } }));
    expect(order).toEqual({
      kind: 'create-before-destroy',
      reason: 'task "main" runs CSI plugin "hostpath": the new alloc registers healthy before the old one stops',
    });
  });

  it.each(['single-node-writer', 'multi-node-single-writer'])('stops a %s writer before its replacement claims the volume', (mode) => {
    const order = replacementOrder(
      group({ volume: { source: 'v1', accessMode: mode } }),
      group({ volume: { source: 'v1', accessMode: mode }, env: { A: '1' } }),
    );
    expect(order.kind).toBe('stop-before-start');
    expect(order.reason).toBe(
      `volume "data" (v1) is ${mode}: one writer at a time, so the old alloc releases it before the new one claims it`,
    );
  });

  it('takes a per_alloc source "db" and a plain "db[0]" as maybe one volume: a single writer stops first even in a plugin group', () => {
    const plain = group({ plugin: 'hostpath', volume: { source: 'db[0]', accessMode: 'single-node-writer' } });
    const own = group({ plugin: 'hostpath', volume: { source: 'db', accessMode: 'single-node-writer' } });
    const perAlloc: GroupSpec = { ...own, volumes: own.volumes.map((v) => ({ ...v, perAlloc: true })) };
    expect(replacementOrder(plain, perAlloc)).toEqual({
      kind: 'stop-before-start',
      reason:
        'volume "data" (db[<index>]) is single-node-writer: one writer at a time, so the old alloc releases it before the new one claims it',
    });
    expect(replacementOrder(perAlloc, plain).kind).toBe('stop-before-start');
    const other = group({ plugin: 'hostpath', volume: { source: 'dbx', accessMode: 'single-node-writer' } });
    expect(replacementOrder(other, perAlloc).kind).toBe('create-before-destroy');
  });

  it('stops first when the new alloc asks for the volume in another mode than the old one holds it', () => {
    const order = replacementOrder(
      group({ volume: { source: 'v1', accessMode: 'multi-node-multi-writer' } }),
      group({ volume: { source: 'v1', accessMode: 'single-node-writer' } }),
    );
    expect(order).toMatchObject({ kind: 'stop-before-start' });
    expect(order.reason).toMatch(
      /asked for as single-node-writer\/file-system and the old alloc holds it as multi-node-multi-writer\/file-system/,
    );
  });

  it('lets a plugin group that also writes a single-writer volume stop first: its claim could not be granted otherwise', () => {
    expect(
      replacementOrder(group({ plugin: 'p', volume: { source: 'v1' } }), group({ plugin: 'p', volume: { source: 'v1' }, env: { A: '1' } }))
        .kind,
    ).toBe('stop-before-start');
  });

  it('starts a plugin group first when its volume is shared (a reader, or a multi-writer mode)', () => {
    expect(
      replacementOrder(
        group({ plugin: 'p', volume: { source: 'v1', readOnly: true, accessMode: 'multi-node-reader-only' } }),
        group({ plugin: 'p', volume: { source: 'v1', readOnly: true, accessMode: 'multi-node-reader-only' } }),
      ).kind,
    ).toBe('create-before-destroy');
    expect(
      replacementOrder(
        group({ plugin: 'p', volume: { source: 'v1', accessMode: 'multi-node-multi-writer' } }),
        group({ plugin: 'p', volume: { source: 'v1', accessMode: 'multi-node-multi-writer' } }),
      ).kind,
    ).toBe('create-before-destroy');
  });

  it('stops any other workload before its replacement starts', () => {
    expect(replacementOrder(group({}), group({ env: { A: '1' } })).kind).toBe('stop-before-start');
    expect(
      replacementOrder(
        group({ volume: { source: 'v1', accessMode: 'multi-node-multi-writer' } }),
        group({ volume: { source: 'v1', accessMode: 'multi-node-multi-writer' } }),
      ).kind,
    ).toBe('stop-before-start');
  });
});
