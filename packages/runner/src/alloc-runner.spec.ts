import type { VolumeMountRecord } from '@csiplug/volumes';
import { CsiplugError, MemoryLogger, ShutdownError } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { FakeDriver } from '@csiplug/driver/testing';
import type { AllocHook, AllocHookContext, CSIHookFactory, CSIPluginSupervisorFactory } from '@csiplug/hooks';
import { type ClientStateDB, openClientState } from '@csiplug/state';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { Alloc, JobSpec } from '@csiplug/jobspec';
import { statusForError } from '@csiplug/api';
import { AllocRunner, AllocStopNotSavedError, AllocsNotSavedError, type AllocRunnerDeps } from './alloc-runner';
import { StateAllocStore, type AllocRecord } from './alloc-store';
import { TaskStateWriter } from './task-state-writer';
import { defaultExecConfig } from '@csiplug/jobspec';

/** A csi hook whose prerun the test controls and whose postrun it can hold. */
class ControlledHook implements AllocHook {
  readonly name = 'csi';
  readonly calls: string[] = [];
  prerunResult: () => Promise<void> = async () => undefined;
  postrunGate: Promise<void> = Promise.resolve();
  /** The context of the last prerun (a test emits events or asks restarts through it). */
  lastContext: AllocHookContext | undefined;
  async prerun(ctx: AllocHookContext) {
    this.calls.push('prerun');
    this.lastContext = ctx;
    await Promise.race([
      this.prerunResult(),
      new Promise<never>((_, reject) => ctx.signal.addEventListener('abort', () => reject(new ShutdownError('aborted')), { once: true })),
    ]);
    return { volumes: { data: { name: 'data', volumeId: 'v1', pluginId: 'p', hostPath: '/x', readOnly: false } } };
  }
  async postrun() {
    this.calls.push('postrun start');
    await this.postrunGate;
    this.calls.push('postrun done');
  }
}

const job: JobSpec = {
  id: 'web',
  name: 'web',
  groups: [
    {
      name: 'app',
      count: 1,
      restart: { attempts: 0, interval: 60_000, delay: 0, mode: 'fail' },
      volumes: [
        { name: 'data', type: 'csi', source: 'v1', accessMode: 'single-node-writer', attachmentMode: 'file-system', readOnly: false },
      ],
      tasks: [
        {
          name: 'server',
          driver: 'exec',
          config: { command: '/bin/true', args: [] },
          env: {},
          volumeMounts: [],
          restart: { attempts: 0, interval: 60_000, delay: 0, mode: 'fail' },
          killSignal: 'SIGTERM',
          killTimeout: 1_000,
        },
      ],
    },
  ],
};

describe('AllocRunner', () => {
  let dataDir: string;
  let state: ClientStateDB;
  let driver: FakeDriver;
  let hook: ControlledHook;
  let clock: FakeClock;
  /** What the volume reconciler holds for the allocs (a stand-in: the runner only reads it). */
  let volumeRecords: VolumeMountRecord[];
  let store: StateAllocStore;
  let logger: MemoryLogger;
  /** The group write of task states; a test flushes it before it reads a state back. */
  let writer: TaskStateWriter;
  /** Whether the API asks for a token (isolated tasks may have the host's network). */
  let hostNet: boolean;
  /** The claims the catalog still holds, as `volume alloc`. */
  let claims: Set<string>;

  const alloc = (): Alloc => ({
    id: 'a1',
    jobId: 'web',
    group: 'app',
    index: 0,
    name: 'web.app[0]',
    job,
    desiredStatus: 'run',
    clientStatus: 'pending',
    createdAt: 0,
  });
  // A runner reads its alloc's saved task states: what an earlier one asked for is written first, as an agent's stop does.
  const runner = (a = alloc(), extra: Partial<AllocRunnerDeps> = {}) =>
    writer.flush() ??
    new AllocRunner(a, {
      dataDir,
      nodeId: 'n1',
      driver,
      allocStore: store,
      taskStates: writer,
      exec: defaultExecConfig(),
      hostNetwork: () => hostNet,
      rawExec: () => true,
      claimHeld: (volumeId: string, allocId: string) => claims.has(`${volumeId} ${allocId}`),
      clock,
      logger,
      supervisors: {} as CSIPluginSupervisorFactory,
      csiHooks: { create: () => hook } as unknown as CSIHookFactory,
      volumes: { list: (allocId?: string) => volumeRecords.filter((r) => allocId === undefined || r.allocId === allocId) },
      variables: {},
      onTaskEvent: () => undefined,
      onStatusChange: () => undefined,
      ...extra,
    });

  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-allocrunner-'));
    state = openClientState({ memory: true });
    driver = new FakeDriver();
    hook = new ControlledHook();
    clock = new FakeClock(0);
    volumeRecords = [];
    hostNet = false;
    claims = new Set();
    store = new StateAllocStore(state);
    logger = new MemoryLogger();
    writer = new TaskStateWriter(store);
  });
  afterEach(() => {
    writer.dispose();
    state.dispose();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('a restore whose setup fails stops the tasks still alive from before, then unmounts', async () => {
    const first = runner();
    await first.run('start');
    await clock.advance(0);
    expect(driver.started.map((c) => c.taskName)).toEqual(['server']);
    first.detach(); // agent restart; the task keeps running
    hook.prerunResult = async () => {
      throw new Error('plugin p did not come back');
    };
    const restored = runner(state.getAllocation<{ alloc: Alloc }>('a1')!.alloc);
    await restored.run('restore');
    expect(driver.stops).toEqual(['100 SIGTERM']);
    expect(hook.calls).toEqual(['prerun', 'prerun', 'postrun start', 'postrun done']);
    expect(restored.alloc.clientStatus).toBe('failed');
  });

  it('an unmount left pending is said done once its claim is gone — not while postrun runs, and once only', async () => {
    claims.add('v1 a1');
    const r = runner();
    await r.run('start');
    await clock.advance(0);
    // Postrun leaves the unmount pending, as the csi hook says it.
    hook.postrun = async () => {
      hook.calls.push('postrun');
      hook.lastContext!.emitEvent({
        type: 'Volume unmount pending',
        message: 'volume "data" (v1) could not be unmounted',
        details: { volume_id: 'v1' },
      });
      // A release arriving while postrun runs is left to postrun (it says what it did).
      r.closeFinishedUnmounts();
    };
    await r.stop();
    const events = () =>
      r
        .taskStates()
        .server!.events.filter((e) => e.details?.volume_id === 'v1')
        .map((e) => e.type);
    expect(events()).toEqual(['Volume unmount pending']);
    // Still claimed: still pending.
    r.closeFinishedUnmounts();
    expect(events()).toEqual(['Volume unmount pending']);
    // The background retry releases the claim: said done, once, however often asked.
    claims.delete('v1 a1');
    r.closeFinishedUnmounts();
    r.closeFinishedUnmounts();
    expect(events()).toEqual(['Volume unmount pending', 'Volume unmounted']);
  });

  it('a retry that finished before postrun said "pending" is said done at the end of postrun', async () => {
    const r = runner();
    await r.run('start');
    await clock.advance(0);
    hook.postrun = async () => {
      hook.lastContext!.emitEvent({ type: 'Volume unmount pending', message: 'pending', details: { volume_id: 'v1' } });
    };
    await r.stop();
    expect(
      r
        .taskStates()
        .server!.events.filter((e) => e.details?.volume_id === 'v1')
        .map((e) => e.type),
    ).toEqual(['Volume unmount pending', 'Volume unmounted']);
  });

  it('an isolated task on the host network, running when the token goes, says so and is refused at its next start', async () => {
    hostNet = true;
    const onHost: JobSpec = JSON.parse(JSON.stringify(job));
    const task = onHost.groups[0]!.tasks[0]!;
    task.isolated = true;
    task.config.networkMode = 'host';
    task.restart = { attempts: 1, interval: 60_000, delay: 0, mode: 'fail' };
    const r = runner({ ...alloc(), job: onHost });
    await r.run('start');
    await clock.advance(0);
    expect(driver.started).toHaveLength(1);
    hostNet = false;
    r.recheckRefusals();
    const types = () => r.taskStates().server!.events.map((e) => e.type);
    expect(types()).toContain('Config Refused');
    // The task exits; its restart is refused with the reason, not started on the host's network.
    driver.exit(100, 1);
    await clock.advance(0);
    await clock.advance(0);
    expect(driver.started).toHaveLength(1);
    const failure = r.taskStates().server!.events.find((e) => e.type === 'Setup Failure');
    expect(failure?.message).toMatch(/network_mode = "host" would let the task reach this agent's API/);
    await r.stop();
  });

  it('keeps the image task roots of an alloc while a task of it runs, and says so (a purge releases them only once every task is dead)', async () => {
    const released: string[] = [];
    const images = {
      prepare: async () => Promise.reject(new Error('not asked in this test')),
      release: async (dir: string) => void released.push(dir),
      adopt: async () => undefined,
    };
    const r = runner(alloc(), { images });
    await r.run('start');
    await clock.advance(0);
    expect(driver.started).toHaveLength(1);
    await r.releaseTaskImages();
    expect(released).toEqual([]);
    expect(logger.records.find((e) => e.level === 'warn' && e.msg.startsWith('the image task roots of the alloc are kept'))).toMatchObject({
      fields: expect.objectContaining({ tasks: ['server'] }),
    });
    await r.stop();
  });

  it('a stop during setup is a stop, not a setup failure, and still tears down', async () => {
    let release!: () => void;
    hook.prerunResult = () => new Promise<void>((r) => (release = r));
    const r = runner();
    const run = r.run('start');
    await r.stop();
    await run;
    void release;
    expect(driver.started).toEqual([]);
    expect(hook.calls).toEqual(['prerun', 'postrun start', 'postrun done']);
    expect(r.alloc.clientStatus).toBe('complete');
    expect(r.taskStates().server!.events.some((e) => e.type === 'Setup Failure')).toBe(false);
  });

  describe('a node plugin alloc waits for the unmounts that need it before its tasks stop', () => {
    const pluginJob: JobSpec = {
      ...job,
      id: 'plug',
      groups: [
        {
          ...job.groups[0]!,
          volumes: [],
          tasks: [
            {
              ...job.groups[0]!.tasks[0]!,
              name: 'node',
              csiPlugin: { id: 'hostpath', type: 'node', mountDir: '/csi', stagePublishBaseDir: '/local/csi', healthTimeout: 30_000 },
            },
            {
              ...job.groups[0]!.tasks[0]!,
              name: 'ctl',
              csiPlugin: { id: 'hostpath', type: 'controller', mountDir: '/csi', stagePublishBaseDir: '/local/csi', healthTimeout: 30_000 },
            },
          ],
        },
      ],
    };
    const pluginAlloc = (): Alloc => ({ ...alloc(), id: 'p1', jobId: 'plug', name: 'plug.app[0]', job: pluginJob });
    const supervisors = { create: () => ({ name: 'csi_plugin_supervisor' }) } as unknown as CSIPluginSupervisorFactory;

    it('asks for the wait with the plugin (a controller beside the node task counts as its controller), then stops the tasks', async () => {
      const asked: string[] = [];
      const r = runner(pluginAlloc(), {
        supervisors,
        drainPlugins: async (allocId, plugins, say) => {
          asked.push(`${allocId} ${JSON.stringify(plugins)} tasks stopped: ${driver.stops.length}`);
          say({ type: 'Waiting for unmounts', message: 'vol-a', time: clock.now() });
        },
      });
      await r.run('start');
      await clock.advance(0);
      expect(driver.started).toHaveLength(2);
      await r.stop();
      expect(asked).toEqual(['p1 [{"id":"hostpath","monolith":true}] tasks stopped: 0']);
      expect(driver.stops).toHaveLength(2);
      expect(r.stopCutShort).toBe(false);
      expect(r.taskStates().node!.events.map((e) => e.type)).toContain('Waiting for unmounts');
    });

    it('the agent going away during the wait (tasks left running): the stop stops nothing, says it was cut short, and leaves the saved stop', async () => {
      let leaving = false;
      const r = runner(pluginAlloc(), {
        supervisors,
        drainPlugins: async () => {
          leaving = true;
        },
        leaving: () => leaving,
      });
      await r.run('start');
      await clock.advance(0);
      await r.stop();
      expect(r.stopCutShort).toBe(true);
      expect(driver.stops).toEqual([]);
      expect(r.alloc.clientStatus).toBe('running');
      expect(store.getAllocation('p1')?.alloc.desiredStatus).toBe('stop');
    });

    it('a workload alloc asks for no wait', async () => {
      let asked = 0;
      const r = runner(alloc(), { drainPlugins: async () => void asked++ });
      await r.run('start');
      await clock.advance(0);
      await r.stop();
      expect(asked).toBe(0);
      expect(r.stopCutShort).toBe(false);
    });
  });

  it('stop waits for a teardown already under way after the tasks ended on their own', async () => {
    let open!: () => void;
    hook.postrunGate = new Promise<void>((r) => (open = r));
    const r = runner();
    await r.run('start');
    await clock.advance(0);
    driver.exit(100, 0); // the task finishes: the alloc starts its teardown
    await clock.advance(0);
    expect(hook.calls).toEqual(['prerun', 'postrun start']);
    let stopped = false;
    const stop = r.stop().then(() => (stopped = true));
    await clock.advance(0);
    expect(stopped).toBe(false);
    open();
    await stop;
    expect(hook.calls).toEqual(['prerun', 'postrun start', 'postrun done']);
  });

  describe('saving a new alloc before it runs', () => {
    /** The error the state gives when its filesystem is full. */
    const noSpace = () =>
      new CsiplugError(
        'ESTATE_NO_SPACE',
        'cannot write /d/state.db: the filesystem it is on is full (SQLITE_FULL: database or disk is full)',
      );
    const saved = () => state.listAllocations<AllocRecord>().allocs.map((a) => `${a.allocId} ${a.alloc.alloc.desiredStatus}`);

    it('saves the new allocs and marks the ones they replace to stop, in one write', () => {
      const old = runner();
      const fresh = [runner({ ...alloc(), id: 'a2', index: 0 }), runner({ ...alloc(), id: 'a3', index: 1 })];
      AllocRunner.saveBeforeRun(fresh, [old]);
      expect(saved()).toEqual(['a1 stop', 'a2 run', 'a3 run']);
    });

    it('a write that fails (a full disk) throws AllocsNotSavedError, a 507 naming the allocs and the cause, and saves nothing', () => {
      const old = runner();
      AllocRunner.saveBeforeRun([old]);
      store.putAllocations = () => {
        throw noSpace();
      };
      const fresh = [runner({ ...alloc(), id: 'a2' })];
      let err: unknown;
      try {
        AllocRunner.saveBeforeRun(fresh, [old]);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(AllocsNotSavedError);
      expect((err as AllocsNotSavedError).code).toBe('EALLOC_SAVE_NO_SPACE');
      expect((err as Error).message).toBe(
        'could not save alloc a2 of job "web": cannot write /d/state.db: the filesystem it is on is full (SQLITE_FULL: database or disk is full); nothing of this request was started or stopped',
      );
      expect(statusForError(err)).toBe(507);
      expect(saved()).toEqual(['a1 run']);
      expect(old.alloc.desiredStatus).toBe('run');
      // Any other failure is a plain 500.
      store.putAllocations = () => {
        throw new Error('SQLITE_IOERR: disk I/O error');
      };
      let other: unknown;
      try {
        AllocRunner.saveBeforeRun(fresh);
      } catch (e) {
        other = e;
      }
      expect((other as AllocsNotSavedError).code).toBe('EALLOC_SAVE_FAILED');
      expect(statusForError(other)).toBe(500);
    });

    it('a later save that fails is logged and made again on the next change: the alloc runs on', async () => {
      const r = runner();
      AllocRunner.saveBeforeRun([r]);
      const put = store.putAllocation.bind(store);
      let full = true;
      store.putAllocation = (record) => {
        if (full) throw noSpace();
        put(record);
      };
      await r.run('start');
      await clock.advance(0);
      expect(r.alloc.clientStatus).toBe('running');
      expect(state.getAllocation<AllocRecord>('a1')!.alloc.clientStatus).toBe('pending');
      expect(logger.records.filter((e) => e.level === 'error' && e.msg.startsWith('could not save the alloc')).length).toBeGreaterThan(0);
      full = false;
      await r.stop();
      expect(state.getAllocation<AllocRecord>('a1')!.alloc).toMatchObject({ desiredStatus: 'stop', clientStatus: 'complete' });
    });

    it('a stop whose save fails (a full disk) is refused with a 507 and kills nothing: the alloc runs on, and a later stop works', async () => {
      const r = runner();
      AllocRunner.saveBeforeRun([r]);
      await r.run('start');
      await clock.advance(0);
      const put = store.putAllocation.bind(store);
      let full = true;
      store.putAllocation = (record) => {
        if (full) throw noSpace();
        put(record);
      };
      const err = await r.stop().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(AllocStopNotSavedError);
      expect((err as Error).message).toBe(
        'could not save the stop of alloc a1 of job "web": cannot write /d/state.db: the filesystem it is on is full (SQLITE_FULL: database or disk is full); the alloc was not stopped and runs on',
      );
      expect(statusForError(err)).toBe(507);
      expect(driver.stops).toEqual([]);
      expect(hook.calls).toEqual(['prerun']);
      expect(r.alloc).toMatchObject({ desiredStatus: 'run', clientStatus: 'running' });
      expect(state.getAllocation<AllocRecord>('a1')!.alloc.desiredStatus).toBe('run');
      full = false;
      await r.stop();
      expect(driver.stops).toEqual(['100 SIGTERM']);
      expect(state.getAllocation<AllocRecord>('a1')!.alloc).toMatchObject({ desiredStatus: 'stop', clientStatus: 'complete' });
    });

    it('final states that cannot be saved are saved by a retry once space returns: the stopped alloc is not run again by a restore', async () => {
      const r = runner();
      AllocRunner.saveBeforeRun([r]);
      await r.run('start');
      await clock.advance(0);
      writer.flush();
      const putAlloc = store.putAllocation.bind(store);
      const putTasks = store.putTaskStates.bind(store);
      let full = false;
      let stopSaved = false;
      store.putAllocation = (record) => {
        if (full) throw noSpace();
        putAlloc(record);
        // The desired stop lands; the disk is full right after it.
        if (record.alloc.desiredStatus === 'stop' && !stopSaved) full = stopSaved = true;
      };
      store.putTaskStates = (entries) => {
        if (full) throw noSpace();
        putTasks(entries);
      };
      await r.stop();
      writer.flush();
      expect(state.getAllocation<AllocRecord>('a1')!.alloc).toMatchObject({ desiredStatus: 'stop', clientStatus: 'running' });
      expect(state.getTaskState('a1', 'server')).toMatchObject({ state: 'running' });
      // No change follows a final state: only the retry can save it.
      full = false;
      await clock.advance(30_000);
      writer.flush();
      expect(state.getAllocation<AllocRecord>('a1')!.alloc).toMatchObject({ desiredStatus: 'stop', clientStatus: 'complete' });
      expect(state.getTaskState('a1', 'server')).toMatchObject({ state: 'dead' });
      r.detach();
      const restored = runner(state.getAllocation<AllocRecord>('a1')!.alloc);
      expect(restored.needsTeardown).toBe(false);
      await restored.run('restore');
      await clock.advance(0);
      expect(driver.started.length).toBe(1);
    });
  });

  it("an alloc hook's event is saved with every task's events (alloc status shows it, a restart keeps it)", async () => {
    hook.prerunResult = async () =>
      hook.lastContext!.emitEvent({ type: 'Volume kept, plugin away', message: 'volume data stays mounted while plugin p is away' });
    const r = runner();
    await r.run('start');
    await clock.advance(0);
    r.detach();
    writer.flush();
    const events = (state.getTaskState('a1', 'server') as { events: { type: string }[] }).events.map((e) => e.type);
    expect(events).toContain('Volume kept, plugin away');
    expect(
      runner()
        .taskStates()
        .server!.events.map((e) => e.type),
    ).toContain('Volume kept, plugin away');
  });

  it("a restart of the tasks asked during a restore's prerun waits until the task is re-attached, then restarts it once", async () => {
    const first = runner();
    await first.run('start');
    await clock.advance(0);
    first.detach();
    let stopsDuringPrerun: string[] | undefined;
    hook.prerunResult = async () => {
      hook.lastContext!.restartTasks('volume data was remounted');
      stopsDuringPrerun = [...driver.stops];
    };
    const restored = runner(state.getAllocation<AllocRecord>('a1')!.alloc);
    await restored.run('restore');
    for (let i = 0; i < 5; i++) await clock.advance(0);
    expect(stopsDuringPrerun).toEqual([]);
    expect(driver.stops).toEqual(['100 SIGTERM']);
    expect(driver.started.length).toBe(2);
    const events = restored.taskStates().server!.events.map((e) => e.type);
    expect(events.indexOf('Reattached')).toBeLessThan(events.indexOf('Restart Signaled'));
    restored.detach();
  });

  it('a remounted volume restarts only the isolated tasks that bind it privately (they cannot see the new mount); others run on', async () => {
    const task = (name: string, isolated: boolean, propagation?: 'private' | 'host-to-task', volume = 'data') => ({
      ...job.groups[0]!.tasks[0]!,
      name,
      isolated,
      config: { command: '/bin/sleep', args: ['100'] },
      volumeMounts: [{ volume, destination: '/data', readOnly: false, ...(propagation ? { propagation } : {}) }],
    });
    const tasks = [
      task('private', true),
      task('explicit', true, 'private'),
      task('slave', true, 'host-to-task'),
      task('host', false),
      task('other', true, 'private', 'logs'),
    ];
    const a: Alloc = { ...alloc(), job: { ...job, groups: [{ ...job.groups[0]!, tasks }] } };
    const r = runner(a);
    await r.run('start');
    await clock.advance(0);
    expect(driver.started.length).toBe(5);
    hook.lastContext!.volumeRemounted!('data');
    for (let i = 0; i < 5; i++) await clock.advance(0);
    const restarted = Object.entries(r.taskStates())
      .filter(([, s]) => s.events.some((e) => /was remounted; an isolated task with propagation_mode = "private"/.test(e.message)))
      .map(([n]) => n)
      .sort();
    expect(restarted).toEqual(['explicit', 'private']);
    expect(driver.stops).toHaveLength(2);
    r.detach();
  });

  it('knows when an alloc left half-stopped by the last agent still needs a teardown', async () => {
    const r = runner();
    await r.run('start');
    await clock.advance(0);
    r.detach();
    // A volume still wanted mounted: the teardown must run (unmount, release).
    volumeRecords.push({
      allocId: 'a1',
      name: 'data',
      volumeId: 'v1',
      externalId: 'v1',
      pluginId: 'p',
      usage: { readOnly: false, accessMode: 'single-node-writer', attachmentMode: 'file-system' },
      desired: 'mounted',
      claimed: true,
      staged: false,
      published: true,
      targetPath: '/x',
      attempts: 0,
      since: 0,
    });
    expect(runner(state.getAllocation<{ alloc: Alloc }>('a1')!.alloc).needsTeardown).toBe(true);
    await runner(state.getAllocation<{ alloc: Alloc }>('a1')!.alloc).stop();
    expect(driver.stops).toEqual(['100 SIGTERM']);
  });
});
