// StateAllocStore over both state backends: the agent's records round-trip,
// a saved record the agent cannot use is reported (never dropped, never a
// crash of the restore), and registerAllocStore binds it to the client state.
import 'reflect-metadata';
import { IClientStateDB, openClientState, registerState, type BoltClientStateDB, type ClientStateDB } from '@csiplug/state';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { container as root } from 'tsyringe';
import type { Alloc, JobSpec, TaskState } from '@csiplug/jobspec';
import { IAllocStore, MalformedAllocRecordError, registerAllocStore, StateAllocStore, type AllocStore } from './alloc-store';

const job: JobSpec = { id: 'web', name: 'web', groups: [{ name: 'app', count: 1, volumes: [], tasks: [] }] } as unknown as JobSpec;
const alloc = (id: string): Alloc => ({
  id,
  jobId: 'web',
  group: 'app',
  index: 0,
  name: 'web.app[0]',
  job,
  desiredStatus: 'run',
  clientStatus: 'running',
  createdAt: 1,
});

describe.each(['sqlite', 'memory'] as const)('StateAllocStore (%s)', (backend) => {
  let dir: string;
  let state: BoltClientStateDB;
  let store: AllocStore;

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-alloc-store-'));
    state = backend === 'sqlite' ? openClientState({ path: path.join(dir, 'state.db') }) : openClientState({ memory: true });
    store = new StateAllocStore(state);
  });
  afterEach(() => {
    state.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  test('putAllocations saves several records in one write, each under its own alloc id', () => {
    store.putAllocations([
      { alloc: alloc('a1'), volumes: {} },
      { alloc: { ...alloc('a2'), desiredStatus: 'stop' }, volumes: {} },
    ]);
    expect(store.listAllocations().records.map((r) => `${r.alloc.id} ${r.alloc.desiredStatus}`)).toEqual(['a1 run', 'a2 stop']);
    expect(store.listAllocationIds()).toEqual(['a1', 'a2']);
  });

  test('allocs and their tasks round-trip, keyed by the alloc id, and are deleted as a whole', () => {
    const volumes = { data: { hostPath: '/csi/data', readOnly: false } } as never;
    store.putAllocation({ alloc: alloc('a1'), volumes });
    store.putAllocation({ alloc: alloc('a2'), volumes: {} });
    const running: TaskState = {
      state: 'running',
      failed: false,
      restarts: 1,
      startedAt: 5,
      events: [{ type: 'Started', time: 5, message: '' }] as never,
    };
    store.putTaskState('a1', 'web', running);
    store.putTaskHandle('a1', 'web', { pid: 42 } as never);
    expect(store.getAllocation('a1')).toEqual({ alloc: alloc('a1'), volumes });
    expect(state.getAllocation('a1')).toEqual({ alloc: alloc('a1'), volumes });
    expect(store.getTaskState('a1', 'web')).toEqual(running);
    expect(store.getTaskHandle('a1', 'web')).toEqual({ pid: 42 });
    expect(store.listAllocations()).toEqual({
      records: [
        { alloc: alloc('a1'), volumes },
        { alloc: alloc('a2'), volumes: {} },
      ],
      failures: [],
    });

    store.deleteTask('a1', 'web');
    expect(store.getTaskState('a1', 'web')).toBeUndefined();
    store.putTaskState('a1', 'web', running);
    store.deleteAllocation('a1');
    expect(store.getAllocation('a1')).toBeUndefined();
    expect(store.getTaskState('a1', 'web')).toBeUndefined();
    expect(store.listAllocations().records.map((r) => r.alloc.id)).toEqual(['a2']);
  });

  test('a record saved without volumes reads as having none', () => {
    state.putAllocation('a1', { alloc: alloc('a1') });
    expect(store.getAllocation('a1')).toEqual({ alloc: alloc('a1'), volumes: {} });
  });

  test("the restore's one read gives each alloc its tasks' handles and states, and a task that cannot be decoded its error", () => {
    const running: TaskState = { state: 'running', failed: false, restarts: 0, events: [{ type: 'Started', message: '', time: 1 }] };
    store.putAllocation({ alloc: alloc('a1'), volumes: {} });
    store.putAllocation({ alloc: alloc('a2'), volumes: {} });
    store.putTaskHandle('a1', 'web', { pid: 7 } as never);
    store.putTaskState('a1', 'web', running);
    store.putTaskState('a1', 'sidecar', { ...running, state: 'dead' });
    state.raw.update((tx) => tx.bucket('allocations')!.bucket('a2')!.createBucket('task-web').put('state', Buffer.from('{"state": tru')));
    const { records, failures } = store.listAllocationsWithTasks();
    expect(failures).toEqual([]);
    expect(records.map((r) => r.record.alloc.id)).toEqual(['a1', 'a2']);
    expect(records[0]!.tasks).toEqual({ web: { handle: { pid: 7 }, state: running }, sidecar: { state: { ...running, state: 'dead' } } });
    expect(records[1]!.tasks['web']!.error?.message).toContain('cannot decode allocations/a2/task-web/state');
    expect(store.listAllocations().records.map((r) => r.alloc.id)).toEqual(['a1', 'a2']);
    // Any path-safe task name is a name, "__proto__" included: it is read as one, and lends nothing to the others.
    store.putTaskState('a2', '__proto__', running);
    const a2 = store.listAllocationsWithTasks().records[1]!.tasks;
    expect(Object.hasOwn(a2, '__proto__')).toBe(true);
    expect(a2['__proto__']!.state).toEqual(running);
    expect(a2['state']).toBeUndefined();
  });

  test('records the agent cannot use are reported with the reason, beside the good ones', () => {
    store.putAllocation({ alloc: alloc('good'), volumes: {} });
    state.putAllocation('not-object', ['a', 'list']);
    state.putAllocation('no-alloc', { volumes: {} });
    state.putAllocation('other-id', { alloc: alloc('someone-else'), volumes: {} });
    state.putAllocation('no-groups', { alloc: { ...alloc('no-groups'), job: { id: 'web' } }, volumes: {} });
    state.putAllocation('bad-volumes', { alloc: alloc('bad-volumes'), volumes: 'data' });
    state.putAllocation('not-json', {});
    state.raw.update((tx) => tx.bucket('allocations')!.bucket('not-json')!.put('alloc', Buffer.from('{"alloc": tru')));

    const { records, failures } = store.listAllocations();
    expect(records.map((r) => r.alloc.id)).toEqual(['good']);
    expect(Object.fromEntries(failures.map((f) => [f.key, f.error]))).toEqual({
      'bad-volumes': expect.stringContaining('"volumes" is not an object'),
      'no-alloc': expect.stringContaining('no "alloc" object'),
      'no-groups': expect.stringContaining('no job with groups'),
      'not-json': expect.stringContaining('cannot decode allocations/not-json/alloc'),
      'not-object': expect.stringContaining('not an object'),
      'other-id': expect.stringContaining('it names alloc "someone-else"'),
    });
    expect(() => store.getAllocation('other-id')).toThrow(MalformedAllocRecordError);
    expect(() => store.getAllocation('other-id')).toThrow(
      'the saved record of alloc other-id (allocations/other-id/alloc) is not an alloc record',
    );
    // Nothing is removed: the records stay for whoever looks into them.
    expect(state.getAllocation('no-alloc')).toEqual({ volumes: {} });
    // And the ids count them all, unreadable ones included: the orphan check never takes them for orphans.
    expect(store.listAllocationIds()).toEqual(['bad-volumes', 'good', 'no-alloc', 'no-groups', 'not-json', 'not-object', 'other-id']);
  });
});

describe('registerAllocStore', () => {
  test('binds the store over the client state registerState binds', () => {
    const c = root.createChildContainer();
    registerState(c, { backend: 'memory' });
    registerAllocStore(c);
    const store = c.resolve<AllocStore>(IAllocStore);
    expect(store).toBeInstanceOf(StateAllocStore);
    expect(c.resolve(IAllocStore)).toBe(store);
    const state = c.resolve<ClientStateDB>(IClientStateDB);
    try {
      store.putAllocation({ alloc: alloc('a1'), volumes: {} });
      expect(state.getAllocation('a1')).toEqual({ alloc: alloc('a1'), volumes: {} });
    } finally {
      state.dispose();
    }
  });

  test('leaves a deployment’s own store alone', () => {
    const c = root.createChildContainer();
    const mine = { mine: true } as unknown as AllocStore;
    c.register(IAllocStore, { useValue: mine });
    registerAllocStore(c);
    expect(c.resolve(IAllocStore)).toBe(mine);
  });
});
