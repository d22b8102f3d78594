// A fake alloc runner and a fake agent for the specs of the job updater and
// rollouts (jobs and allocs from @csiplug/jobspec/testing); the fake agent records
// what a rollout does (placed, stopped, saved) in one timeline.
import { Emitter, MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import type { PluginInfo } from '@csiplug/csimanager';
import type { MountedVolume } from '@csiplug/hooks';
import type { AgentEventInput } from '@csiplug/api';
import type { Alloc, TaskState } from '@csiplug/jobspec';
import type { AgentEvent } from '@csiplug/api';
import type { RolloutAlloc, RolloutHost } from '../../src';
export { allocId, makeAlloc, makeJob, type GroupOptions } from '@csiplug/jobspec/testing';
export class FakeAlloc implements RolloutAlloc {
  readonly mountedVolumes: Record<string, MountedVolume> = {};
  tasks: Record<string, TaskState>;
  stopGate: Promise<void> | undefined;
  /** Its stop ends before stopping anything, as an agent going away while a plugin waits for unmounts leaves it. */
  stopCutShort = false;
  private stopping: Promise<void> | undefined;

  constructor(
    readonly alloc: Alloc,
    private readonly agent: FakeAgent,
  ) {
    const state = alloc.clientStatus === 'running' ? 'running' : 'pending';
    this.tasks = Object.fromEntries(
      alloc.job.groups.find((g) => g.name === alloc.group)!.tasks.map((t) => [t.name, { state, failed: false, restarts: 0, events: [] }]),
    );
  }

  get needsTeardown(): boolean {
    return Object.values(this.tasks).some((t) => t.state !== 'dead');
  }

  taskStates(): Record<string, TaskState> {
    return this.tasks;
  }

  stop(): Promise<void> {
    this.stopping ??= (async () => {
      this.alloc.desiredStatus = 'stop';
      this.agent.timeline.push(`stop ${this.alloc.name} v${this.alloc.jobVersion ?? 0}`);
      await this.stopGate;
      if (this.stopCutShort) return;
      for (const t of Object.values(this.tasks)) t.state = 'dead';
      if (this.alloc.clientStatus !== 'failed') this.alloc.clientStatus = 'complete';
      this.agent.timeline.push(`stopped ${this.alloc.name} v${this.alloc.jobVersion ?? 0}`);
    })();
    return this.stopping;
  }

  /** Its tasks run (an event tells the rollout). */
  run(): void {
    for (const t of Object.values(this.tasks)) t.state = 'running';
    this.alloc.clientStatus = 'running';
    this.agent.fire(this.alloc.id, 'Started');
  }

  /** Its task dies for good. */
  fail(): void {
    for (const t of Object.values(this.tasks))
      Object.assign(t, {
        state: 'dead',
        failed: true,
        events: [{ type: 'Not Restarting', message: 'exceeded allowed attempts', time: 0 }],
      });
    this.alloc.clientStatus = 'failed';
    this.agent.fire(this.alloc.id, 'Not Restarting');
  }
}

/** A fake agent: its allocs, plugin instances, events, and a timeline of what the rollout did. */
export class FakeAgent implements RolloutHost<FakeAlloc> {
  readonly clock = new FakeClock();
  readonly logger = new MemoryLogger();
  readonly allocs = new Map<string, FakeAlloc>();
  readonly timeline: string[] = [];
  readonly events: AgentEventInput[] = [];
  pluginInstances: PluginInfo[] = [];
  /** Set to make the next save throw it. */
  failSave: Error | undefined;
  /** Every write, as the alloc names it held (`name (stop)` for one saved as desired stop). */
  readonly writes: string[][] = [];
  /** What the state holds: a copy of each alloc record as last written (what a next agent would restore). */
  readonly records = new Map<string, Alloc>();
  /** Registry entries per plugin name, newest first (pluginHealthy adds one). */
  readonly registrations = new Map<string, { allocId: string; restored: boolean }[]>();
  private readonly emitter = new Emitter<AgentEvent>();
  readonly onEvent = this.emitter.event;
  private index = 0;

  add(alloc: Alloc): FakeAlloc {
    const r = new FakeAlloc(alloc, this);
    this.allocs.set(alloc.id, r);
    return r;
  }

  allocsOf(jobId: string): FakeAlloc[] {
    return [...this.allocs.values()].filter((r) => r.alloc.jobId === jobId);
  }

  jobIds(): string[] {
    return [...new Set([...this.allocs.values()].map((r) => r.alloc.jobId))];
  }

  prepare(alloc: Alloc): FakeAlloc {
    return new FakeAlloc(alloc, this);
  }

  /** As AllocRunner.saveBeforeRun: nothing is written when `allocs` is empty. */
  save(allocs: readonly FakeAlloc[], stopping: readonly FakeAlloc[] = []): void {
    const err = this.failSave;
    if (err) {
      this.failSave = undefined;
      throw err;
    }
    if (allocs.length === 0) return;
    this.writes.push([...allocs.map((r) => r.alloc.name), ...stopping.map((r) => `${r.alloc.name} (stop)`)]);
    for (const r of allocs) this.records.set(r.alloc.id, structuredClone(r.alloc));
    for (const r of stopping) this.records.set(r.alloc.id, { ...structuredClone(r.alloc), desiredStatus: 'stop' });
  }

  pluginRegistrations(_type: string, name: string): readonly { allocId: string; restored: boolean }[] {
    return this.registrations.get(name) ?? [];
  }

  /** As the agent: only a stopped alloc whose tasks are all dead goes. */
  forget(r: FakeAlloc): boolean {
    if (r.alloc.desiredStatus !== 'stop' || r.needsTeardown) return false;
    this.allocs.delete(r.alloc.id);
    this.records.delete(r.alloc.id);
    this.timeline.push(`forget ${r.alloc.name} v${r.alloc.jobVersion ?? 0}`);
    return true;
  }

  launch(r: FakeAlloc): void {
    this.allocs.set(r.alloc.id, r);
    this.timeline.push(`place ${r.alloc.name} v${r.alloc.jobVersion ?? 0}`);
  }

  plugins(): readonly PluginInfo[] {
    return this.pluginInstances;
  }

  emit(event: AgentEventInput): void {
    this.events.push(event);
    this.emitter.fire({ index: ++this.index, time: this.clock.now(), ...event });
  }

  /** An event about an alloc, as its runner would send one. */
  fire(allocId: string, type: string): void {
    this.emitter.fire({ index: ++this.index, time: this.clock.now(), topic: 'Task', type, message: type, allocId });
  }

  /**
   * The plugin `name` of alloc `allocId` is registered and healthy (both
   * sides of a monolith): its registry entry becomes the newest, and — as
   * the CSI manager serves one instance per plugin — its instance replaces
   * any other alloc's.
   */
  pluginHealthy(name: string, allocId: string): void {
    this.registrations.set(name, [
      { allocId, restored: false },
      ...(this.registrations.get(name) ?? []).filter((e) => e.allocId !== allocId),
    ]);
    this.pluginInstances = this.pluginInstances.filter((p) => p.name !== name);
    for (const type of ['csi-controller', 'csi-node']) {
      this.pluginInstances.push({
        type,
        name,
        allocId,
        socketPath: '/s',
        version: '1',
        deployment: 'monolith',
        healthy: true,
        fingerprinted: true,
        description: 'healthy',
        updateTime: 0,
      } as PluginInfo);
    }
    this.emitter.fire({
      index: ++this.index,
      time: this.clock.now(),
      topic: 'Plugin',
      type: 'Plugin healthy',
      message: name,
      allocId,
      pluginId: name,
    });
  }

  /** The live allocs of a job, as `name vN`. */
  live(jobId: string): string[] {
    return this.allocsOf(jobId)
      .filter((r) => r.alloc.desiredStatus === 'run' && r.alloc.clientStatus !== 'failed' && r.alloc.clientStatus !== 'complete')
      .map((r) => `${r.alloc.name} v${r.alloc.jobVersion ?? 0}`)
      .sort();
  }

  /** The allocs of a job placed most recently, newest last. */
  placed(jobId: string): FakeAlloc[] {
    return this.allocsOf(jobId).filter((r) => r.alloc.deploymentId !== undefined);
  }

  eventTypes(): string[] {
    return this.events.map((e) => e.type);
  }
}
