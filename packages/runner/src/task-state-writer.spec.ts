import { openClientState, type BoltClientStateDB } from '@csiplug/state';
import type { TaskState } from '@csiplug/jobspec';
import { StateAllocStore } from './alloc-store';
import { TASK_STATE_WRITE_MAX, TaskStateWriter, type TaskStateSave } from './task-state-writer';

describe('TaskStateWriter', () => {
  let state: BoltClientStateDB;
  let store: StateAllocStore;
  let writes: number;

  beforeEach(() => {
    state = openClientState({ memory: true });
    store = new StateAllocStore(state);
    writes = 0;
    const put = store.putTaskStates.bind(store);
    store.putTaskStates = (entries) => {
      writes++;
      put(entries);
    };
  });
  afterEach(() => state.dispose());

  /** A task whose state the test changes; `results` collects what done() was told. */
  const task = (allocId: string, name: string) => {
    const t = {
      current: { state: 'pending', failed: false, restarts: 0, events: [] } as TaskState,
      results: [] as unknown[],
      save: undefined as unknown as TaskStateSave,
    };
    t.save = { allocId, task: name, state: () => t.current, done: (ok, err) => void t.results.push(ok ? 'ok' : err) };
    return t;
  };

  it('writes the states asked for within its delay in one write, each task once, with its newest state', async () => {
    const writer = new TaskStateWriter(store, 5);
    const a = task('a1', 'web');
    const b = task('a2', 'web');
    writer.save(a.save);
    a.current = { ...a.current, state: 'running' };
    writer.save(a.save);
    writer.save(b.save);
    expect(writer.size).toBe(2);
    expect(state.getTaskState('a1', 'web')).toBeUndefined();
    await new Promise((r) => setTimeout(r, 30));
    expect(writes).toBe(1);
    expect(state.getTaskState('a1', 'web')).toMatchObject({ state: 'running' });
    expect(state.getTaskState('a2', 'web')).toMatchObject({ state: 'pending' });
    expect(a.results).toEqual(['ok']);
    expect(b.results).toEqual(['ok']);
  });

  it('a cancelled task (its record deleted) is not written, so nothing brings its record back', () => {
    const writer = new TaskStateWriter(store, 1_000);
    const a = task('a1', 'web');
    const b = task('a2', 'web');
    writer.save(a.save);
    writer.save(b.save);
    writer.cancel('a1', 'web');
    writer.flush();
    expect(state.listAllocationIds()).toEqual(['a2']);
    expect(a.results).toEqual([]);
  });

  it('a full disk fails every task of the write, and writes nothing of it', () => {
    const writer = new TaskStateWriter(store, 1_000);
    const full = Object.assign(new Error('disk full'), { code: 'ESTATE_NO_SPACE' });
    let calls = 0;
    store.putTaskStates = () => {
      calls++;
      throw full;
    };
    const a = task('a1', 'web');
    const b = task('a1', 'sidecar');
    writer.save(a.save);
    writer.save(b.save);
    writer.flush();
    expect(calls).toBe(1);
    expect(a.results).toEqual([full]);
    expect(b.results).toEqual([full]);
    expect(writer.size).toBe(0);
    expect(state.listAllocationIds()).toEqual([]);
  });

  it('one entry that cannot be written (a damaged bucket) fails only its own task: the group is written again entry by entry', () => {
    const writer = new TaskStateWriter(store, 1_000);
    // allocations/a1/task-web holds a value where a bucket belongs.
    state.putAllocation('a1', { id: 'a1' });
    state.raw.update((tx) => tx.bucket('allocations')!.bucket('a1')!.put('task-web', Buffer.from('x')));
    const bad = task('a1', 'web');
    const good = task('a2', 'web');
    writer.save(bad.save);
    writer.save(good.save);
    writer.flush();
    expect(bad.results).toHaveLength(1);
    expect(bad.results[0]).toBeInstanceOf(Error);
    expect(good.results).toEqual(['ok']);
    expect(state.getTaskState('a2', 'web')).toMatchObject({ state: 'pending' });
  });

  it('once disposed, a state asked for is written at once (a late event while the state is still open)', () => {
    const writer = new TaskStateWriter(store, 60_000);
    writer.dispose();
    const a = task('a1', 'web');
    writer.save(a.save);
    expect(a.results).toEqual(['ok']);
    expect(writer.size).toBe(0);
    expect(state.getTaskState('a1', 'web')).toMatchObject({ state: 'pending' });
  });

  it(`writes at once when ${TASK_STATE_WRITE_MAX} states wait, and dispose writes what is left`, () => {
    const writer = new TaskStateWriter(store, 60_000);
    for (let i = 0; i < TASK_STATE_WRITE_MAX + 1; i++) writer.save(task(`a${i}`, 'web').save);
    expect(writes).toBe(1);
    expect(writer.size).toBe(1);
    writer.dispose();
    expect(writes).toBe(2);
    expect(state.listAllocationIds()).toHaveLength(TASK_STATE_WRITE_MAX + 1);
  });
});
