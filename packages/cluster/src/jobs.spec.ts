// What `job status` is told of the slots no node could take: grouped by
// group and by the same reasons (in whatever order the nodes came), each
// group counted in full with only its first few slots named, so a job of
// thousands of slots still fits one etcd value.
import { summarisePending } from './jobs';
import type { Unplaced } from './scheduler';

const unplaced = (group: string, index: number, reasons: Record<string, string>): Unplaced => ({
  jobId: 'web',
  group,
  slot: `${group}/${index}`,
  reasons,
});

describe('summarisePending', () => {
  it('is empty for nothing pending', () => {
    expect(summarisePending([])).toEqual([]);
  });

  it('puts the slots of one group with the same reasons together, whatever the order of the nodes', () => {
    const down = 'the node is down';
    const noDriver = 'no qemu driver on the node';
    const result = summarisePending([
      unplaced('vm', 0, { n1: noDriver, n2: down }),
      unplaced('vm', 1, { n2: down, n1: noDriver }),
      unplaced('vm', 2, { n1: noDriver, n2: down }),
    ]);
    expect(result).toEqual([{ group: 'vm', count: 3, slots: ['vm/0', 'vm/1', 'vm/2'], reasons: { n1: noDriver, n2: down } }]);
  });

  it("keeps apart other groups with the same reasons, and one group's slots with other reasons, in the order first seen", () => {
    const full = 'the node runs at most 1 allocs of a job (its limits { max_allocs_per_job })';
    const down = 'the node is down';
    const result = summarisePending([
      unplaced('web', 3, { n1: full }),
      unplaced('db', 0, { n1: full }),
      unplaced('web', 4, { n1: down }),
      unplaced('web', 5, { n1: full }),
      // No node at all: no reasons, a set of its own.
      unplaced('web', 6, {}),
    ]);
    expect(result).toEqual([
      { group: 'web', count: 2, slots: ['web/3', 'web/5'], reasons: { n1: full } },
      { group: 'db', count: 1, slots: ['db/0'], reasons: { n1: full } },
      { group: 'web', count: 1, slots: ['web/4'], reasons: { n1: down } },
      { group: 'web', count: 1, slots: ['web/6'], reasons: {} },
    ]);
  });

  it('counts every slot but names only the first ten of a set', () => {
    const reasons = { n1: 'no docker driver on the node' };
    const result = summarisePending(Array.from({ length: 2_500 }, (_, i) => unplaced('web', i, reasons)));
    expect(result).toEqual([{ group: 'web', count: 2_500, slots: Array.from({ length: 10 }, (_, i) => `web/${i}`), reasons }]);
  });

  it('tells two reasons apart that differ only in which node says which', () => {
    const result = summarisePending([unplaced('web', 0, { n1: 'a', n2: 'b' }), unplaced('web', 1, { n1: 'b', n2: 'a' })]);
    expect(result.map((p) => p.slots)).toEqual([['web/0'], ['web/1']]);
  });
});
