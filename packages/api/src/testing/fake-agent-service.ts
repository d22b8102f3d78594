// An in-memory AgentService for tests of the HTTP API and the CLI: jobs make
// allocs whose tasks "run" at once — a run is planned with the agent's own
// planJob, and what it replaces is swapped at once (no rollout, no
// deployment) — volumes live in a map with claims, and
// plugins are whatever the test puts there. Every change is recorded in
// `calls`, so a test can prove a refused request changed nothing; `gate`
// makes the async calls wait, for tests of a slow agent. An unknown job or
// alloc fails with the service interface's NotFoundError (the agent throws it too) (ENOT_FOUND), so a test
// against the fake sees what a client of the agent sees.
import { type Clock, Emitter, type Event, ValidationError, requestsOfAlloc, toDisposable } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import type { MountedVolume } from '@csiplug/hooks';
import { createHash } from 'crypto';
import { NotFoundError } from '../service-errors';
import { FakePluginUnavailableError, FakeVolumeExistsError, FakeVolumeInUseError, FakeVolumeNotFoundError } from './fake-errors';
import { planJob, type JobPlan } from '@csiplug/jobspec';
import { memoryLogSlice, type LogRange, type LogSlice } from '../log-slice';
import type { JobSpec, TaskState } from '@csiplug/jobspec';
import type {
  AgentEvent,
  AgentHealth,
  AgentService,
  AllocView,
  ExternalVolumeView,
  RoutedAnswer,
  JobView,
  MountUsageView,
  NodeList,
  NodePurgeResult,
  NodeView,
  Page,
  PluginView,
  RunJobOptions,
  RunJobResult,
  SnapshotListOptions,
  SnapshotRequestOptions,
  SnapshotView,
  VolumeClaimView,
  VolumeDetachResult,
  VolumeView,
} from '../service';
import type { VolumeSpec } from '@csiplug/jobspec';

export interface FakeAgentServiceOptions {
  clock?: Clock;
  nodeId?: string;
}

export { FakeCodes } from './fake-errors';

export class FakeAgentService implements AgentService {
  readonly clock: Clock;
  readonly nodeId: string;
  /** Every call that changes something, as `method arg`. */
  readonly calls: string[] = [];
  readonly jobs = new Map<string, JobView>();
  readonly allocs = new Map<string, AllocView>();
  readonly plugins = new Map<string, PluginView>();
  readonly volumes = new Map<string, VolumeView>();
  /** `<alloc>/<task>/<stream>` → the log's text (or bytes). */
  readonly logs = new Map<string, string | Buffer>();
  /** Which file each log is (by the same keys, `.1` for a rotated one), when a test rotates one: see rotateLog. */
  readonly logFileIds = new Map<string, string>();
  private nextLogFileId = 1;

  /** Rotates a log as RotatingLog does: the current file becomes `.1` (the one there is dropped), a new empty one takes its place. */
  rotateLog(key: string): void {
    this.logs.set(`${key}.1`, this.logs.get(key) ?? '');
    this.logFileIds.set(`${key}.1`, this.logFileIds.get(key) ?? String(this.nextLogFileId++));
    this.logs.set(key, '');
    this.logFileIds.set(key, String(this.nextLogFileId++));
  }
  /** While set, every async call waits for it before doing anything: an agent slow to answer. */
  gate: Promise<void> | undefined;
  /** Set to make the next service call throw it (once). */
  nextError: Error | undefined;
  healthy = true;

  private readonly emitter = new Emitter<AgentEvent>();
  private subscribers = 0;
  readonly onEvent: Event<AgentEvent> = (listener, disposables) => {
    this.subscribers++;
    const sub = this.emitter.event(listener);
    const counted = toDisposable(() => {
      this.subscribers--;
      sub.dispose();
    });
    disposables?.add(counted);
    return counted;
  };
  private eventIndex = 0;
  private allocCounter = 0;
  private readonly startedAt: number;

  constructor(options: FakeAgentServiceOptions = {}) {
    this.clock = options.clock ?? new FakeClock();
    this.nodeId = options.nodeId ?? 'fake-node';
    this.startedAt = this.clock.now();
  }

  /** Fires an event as the agent would. */
  emit(event: Omit<AgentEvent, 'index' | 'time'> & { time?: number }): AgentEvent {
    const full: AgentEvent = { ...event, index: ++this.eventIndex, time: event.time ?? this.clock.now() };
    this.emitter.fire(full);
    return full;
  }

  /** How many listeners (event streams) are subscribed to onEvent. */
  get eventSubscribers(): number {
    return this.subscribers;
  }

  addPlugin(view: Partial<PluginView> & { id: string }): PluginView {
    const full: PluginView = {
      provider: `${view.id}.csi.example`,
      version: '1.0.0',
      controllerRequired: false,
      controllersHealthy: 0,
      controllersExpected: 0,
      nodesHealthy: 1,
      nodesExpected: 1,
      allocs: [],
      ...view,
    };
    this.plugins.set(full.id, full);
    return full;
  }

  /** Claims a volume for an alloc, as a running workload would. */
  claim(volumeId: string, allocId: string, mode: 'read' | 'write' = 'write'): void {
    const v = this.volumes.get(volumeId);
    if (!v) throw new FakeVolumeNotFoundError(volumeId);
    const cap = v.capabilities[0]!;
    v.claims.push({ allocId, mode, accessMode: cap.accessMode, attachmentMode: cap.attachmentMode, since: this.clock.now() });
  }

  private failIfAsked(): void {
    const err = this.nextError;
    if (err) {
      this.nextError = undefined;
      throw err;
    }
  }

  // AgentService ---------------------------------------------------------------

  health(): AgentHealth {
    this.failIfAsked();
    const allocs = [...this.allocs.values()];
    const count = (s: string) => allocs.filter((a) => a.clientStatus === s).length;
    const plugins = [...this.plugins.values()];
    return {
      ok: this.healthy,
      nodeId: this.nodeId,
      dataDir: '/var/lib/csiplug',
      version: '0.1.0',
      startedAt: this.startedAt,
      allocs: { running: count('running'), pending: count('pending'), dead: count('complete') + count('failed') },
      plugins: { healthy: plugins.filter((p) => p.nodesHealthy + p.controllersHealthy > 0).length, total: plugins.length },
    };
  }

  /** The fake is one node on its own, never a cluster. */
  async listNodes(): Promise<NodeList> {
    const n = this.node();
    return {
      cluster: false,
      nodes: [
        {
          name: n.id,
          status: n.status,
          nodeClass: '',
          drivers: ['exec', 'raw_exec'],
          plugins: n.plugins.map((p) => ({ id: p.id, type: p.type, healthy: p.healthy })),
          self: true,
        },
      ],
    };
  }

  /** One node on its own has no cluster to purge a node from (as the agent answers). */
  async purgeNode(name: string): Promise<NodePurgeResult> {
    await this.gate;
    this.calls.push(`purgeNode ${name}`);
    throw new NotFoundError('this agent is not in a cluster: it is its only node, and a node is purged only from a cluster');
  }

  /** This node as the fake has it: both drivers there, a node instance per plugin with a node side. */
  node(): NodeView {
    const h = this.health();
    return {
      id: this.nodeId,
      name: 'fake-host',
      version: h.version,
      dataDir: h.dataDir,
      startedAt: h.startedAt,
      status: h.ok ? 'ready' : 'down',
      drivers: {
        exec: { detected: true, healthy: true, description: 'isolated tasks on runc (fake)' },
        raw_exec: { detected: true, healthy: true, description: 'host processes' },
        docker: { detected: true, healthy: true, description: 'OCI images isolated on runc (fake)' },
        podman: { detected: true, healthy: true, description: 'OCI images isolated on runc (fake)' },
      },
      plugins: [...this.plugins.values()].flatMap((p) =>
        p.node
          ? [
              {
                id: p.id,
                type: 'csi-node',
                healthy: p.node.healthy,
                description: p.node.description,
                nodeId: String(p.node.info['Node ID'] ?? this.nodeId),
                maxVolumes: 'unlimited' as const,
                topology: { zone: 'z1' },
              },
            ]
          : [],
      ),
      allocs: h.allocs,
    };
  }

  listJobs(): JobView[] {
    this.failIfAsked();
    return [...this.jobs.values()].sort((a, b) => a.id.localeCompare(b.id));
  }

  getJob(id: string): JobView | undefined {
    this.failIfAsked();
    return this.jobs.get(id);
  }

  planJob(job: JobSpec): JobPlan {
    this.failIfAsked();
    return planJob(job, this.jobAllocs(job.id));
  }

  async runJob(job: JobSpec, options: RunJobOptions = {}): Promise<RunJobResult> {
    await this.gate;
    this.failIfAsked();
    this.calls.push(options.queue ? `runJob ${job.id} queue` : `runJob ${job.id}`);
    const old = this.jobs.get(job.id);
    const plan = planJob(job, this.jobAllocs(job.id));
    const version = plan.version.to;
    if (!plan.changed) return { jobId: job.id, allocIds: [], replaced: true, unchanged: true, version, plan };
    const view: JobView = old ?? { id: job.id, name: job.name, status: 'running', version, job, allocs: [] };
    Object.assign(view, { name: job.name, status: 'running', version, job });
    const allocIds: string[] = [];
    for (const g of plan.groups) {
      for (const p of g.allocs) {
        const current = p.allocId === undefined ? undefined : this.allocs.get(p.allocId);
        if (current && (p.update === 'destroy' || p.update === 'create/destroy')) this.stopAlloc(view, current);
        if (current && p.update === 'in-place') {
          Object.assign(current, { job, jobVersion: version });
          view.allocs.find((a) => a.id === current.id)!.jobVersion = version;
        }
        if (p.update !== 'create' && p.update !== 'create/destroy') continue;
        const alloc = this.makeAlloc(job, g.name, p.index, version);
        this.allocs.set(alloc.id, alloc);
        view.allocs.push({
          id: alloc.id,
          name: alloc.name,
          group: alloc.group,
          jobVersion: version,
          clientStatus: alloc.clientStatus,
          desiredStatus: alloc.desiredStatus,
        });
        allocIds.push(alloc.id);
        for (const task of Object.keys(alloc.tasks))
          this.emit({ topic: 'Task', type: 'Started', message: 'Task started by client', allocId: alloc.id, task, jobId: job.id });
      }
    }
    this.jobs.set(job.id, view);
    this.emit({ topic: 'Job', type: old ? 'JobUpdated' : 'JobRegistered', message: `job ${job.id} registered`, jobId: job.id });
    return { jobId: job.id, allocIds, replaced: old !== undefined, unchanged: false, version, plan };
  }

  private jobAllocs(jobId: string): AllocView[] {
    return [...this.allocs.values()].filter((a) => a.jobId === jobId);
  }

  async stopJob(id: string, options: { purge?: boolean } = {}): Promise<JobView> {
    await this.gate;
    this.failIfAsked();
    this.calls.push(`stopJob ${id}${options.purge ? ' purge' : ''}`);
    const job = this.jobs.get(id);
    if (!job) throw new NotFoundError(`job "${id}" not found`);
    this.stopAllocs(job);
    job.status = 'dead';
    if (options.purge) {
      this.jobs.delete(id);
      for (const a of job.allocs) this.allocs.delete(a.id);
    }
    this.emit({ topic: 'Job', type: 'JobDeregistered', message: `job ${id} stopped`, jobId: id });
    return job;
  }

  listAllocs(): AllocView[] {
    this.failIfAsked();
    return [...this.allocs.values()].sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  }

  getAlloc(id: string): AllocView | undefined {
    this.failIfAsked();
    return this.allocs.get(id);
  }

  async allocLogs(allocId: string, task: string, stream: 'stdout' | 'stderr', range: LogRange = {}): Promise<LogSlice> {
    await this.gate;
    this.failIfAsked();
    const alloc = this.allocs.get(allocId);
    if (!alloc) throw new NotFoundError(`alloc "${allocId}" not found`);
    if (!Object.hasOwn(alloc.tasks, task))
      throw new NotFoundError(`alloc ${alloc.id} has no task "${task}" (tasks: ${Object.keys(alloc.tasks).join(', ')})`);
    const key = `${allocId}/${task}/${stream}${range.file ? `.${range.file}` : ''}`;
    const slice = memoryLogSlice(Buffer.from(this.logs.get(key) ?? ''), range);
    const fileId = this.logFileIds.get(key);
    return fileId === undefined ? slice : { ...slice, fileId };
  }

  listPlugins(): PluginView[] {
    this.failIfAsked();
    return [...this.plugins.values()].sort((a, b) => a.id.localeCompare(b.id));
  }

  getPlugin(id: string): PluginView | undefined {
    this.failIfAsked();
    return this.plugins.get(id);
  }

  listVolumes(): VolumeView[] {
    this.failIfAsked();
    return [...this.volumes.values()].sort((a, b) => a.id.localeCompare(b.id));
  }

  getVolume(id: string): VolumeView | undefined {
    this.failIfAsked();
    return this.volumes.get(id);
  }

  async registerVolume(spec: VolumeSpec): Promise<VolumeView> {
    await this.gate;
    this.failIfAsked();
    const existing = this.volumes.get(spec.id);
    if (existing) {
      // As the agent (and Nomad): a register of a volume there is updates it, its claims kept (the agent's catalog checks what may change).
      this.calls.push(`registerVolume ${spec.id} update`);
      const updated: VolumeView = { ...existing, capabilities: spec.capabilities, secrets: { ...spec.secrets } };
      if (Object.keys(spec.context).length) updated.context = { ...spec.context };
      this.volumes.set(spec.id, updated);
      return updated;
    }
    if (spec.externalId === undefined)
      throw new ValidationError(
        `volume "${spec.id}": external_id is required to register an existing volume; use create to make a new one`,
        'external_id',
      );
    return this.addVolume('registerVolume', spec, spec.externalId);
  }

  async createVolume(spec: VolumeSpec): Promise<VolumeView> {
    await this.gate;
    this.failIfAsked();
    return this.addVolume('createVolume', spec, `ext-${spec.id}`);
  }

  async deregisterVolume(id: string, options: { force?: boolean } = {}): Promise<void> {
    await this.gate;
    this.failIfAsked();
    const v = this.volumeOrThrow(id);
    if (v.claims.length && !options.force) {
      throw new FakeVolumeInUseError(id, v.claims.length, 'stop them first or use -force');
    }
    this.calls.push(`deregisterVolume ${id}${options.force ? ' force' : ''}`);
    this.volumes.delete(id);
    this.emit({ topic: 'Volume', type: 'VolumeDeregistered', message: `volume ${id} deregistered`, volumeId: id });
  }

  async deleteVolume(id: string, options: { secrets?: Record<string, string> } = {}): Promise<void> {
    await this.gate;
    this.failIfAsked();
    const v = this.volumeOrThrow(id);
    if (v.claims.length) throw new FakeVolumeInUseError(id, v.claims.length, 'stop them first');
    this.calls.push(`deleteVolume ${id}`);
    this.perCall.push({ call: `deleteVolume ${id}`, ...(options.secrets ? { secrets: { ...options.secrets } } : {}) });
    this.volumes.delete(id);
    this.emit({ topic: 'Volume', type: 'VolumeDeleted', message: `volume ${id} deleted`, volumeId: id });
  }
  /** A fake runs no plugin: a routed controller call is refused as by an agent whose node runs no controller of its own. */
  async answerRoutedCall(plugin: string): Promise<RoutedAnswer> {
    await this.gate;
    this.failIfAsked();
    this.calls.push(`answerRoutedCall ${plugin}`);
    throw new FakePluginUnavailableError(plugin);
  }

  /** What the volume operations answer: set by a test; unset, each answers empty (or, for a snapshot, a made-up one). */
  readonly usage: MountUsageView[] = [];
  readonly snapshots: SnapshotView[] = [];
  readonly externalVolumes: ExternalVolumeView[] = [];
  /** The per-call secrets and parameters each volume or snapshot call was given (test-only: values kept so a test can check them). */
  readonly perCall: Array<{ call: string; secrets?: Record<string, string>; parameters?: Record<string, string> }> = [];

  async volumeUsage(filter: { volumeId?: string; allocId?: string }): Promise<MountUsageView[]> {
    await this.gate;
    this.failIfAsked();
    if (filter.volumeId !== undefined) this.volumeOrThrow(filter.volumeId);
    return this.usage.filter(
      (u) =>
        (filter.volumeId === undefined || u.volumeId === filter.volumeId) && (filter.allocId === undefined || u.allocId === filter.allocId),
    );
  }

  async createSnapshot(volumeId: string, name?: string, options: SnapshotRequestOptions = {}): Promise<SnapshotView> {
    await this.gate;
    this.failIfAsked();
    const v = this.volumeOrThrow(volumeId);
    this.calls.push(`createSnapshot ${volumeId} ${name ?? ''}`.trim());
    this.perCall.push({ call: `createSnapshot ${volumeId}`, ...copiesOf(options) });
    const snap: SnapshotView = {
      pluginId: v.pluginId,
      id: `snap-${name ?? volumeId}`,
      externalSourceVolumeId: v.externalId,
      sourceVolumeId: volumeId,
      sizeBytes: 0,
      createTime: this.clock.now(),
      ready: true,
    };
    this.snapshots.push(snap);
    return snap;
  }

  async deleteSnapshot(pluginId: string, snapshotId: string, options: { secrets?: Record<string, string> } = {}): Promise<void> {
    await this.gate;
    this.failIfAsked();
    this.calls.push(`deleteSnapshot ${pluginId} ${snapshotId}`);
    this.perCall.push({ call: `deleteSnapshot ${pluginId} ${snapshotId}`, ...copiesOf(options) });
    const i = this.snapshots.findIndex((s) => s.pluginId === pluginId && s.id === snapshotId);
    if (i >= 0) this.snapshots.splice(i, 1);
  }

  async listSnapshots(options: SnapshotListOptions): Promise<Page<SnapshotView>> {
    await this.gate;
    this.failIfAsked();
    this.perCall.push({ call: `listSnapshots ${options.pluginId ?? ''}`.trim(), ...copiesOf(options) });
    return page(
      this.snapshots.filter((s) => options.pluginId === undefined || s.pluginId === options.pluginId),
      options,
    );
  }

  async listExternalVolumes(options: { pluginId?: string; perPage?: number; nextToken?: string }): Promise<Page<ExternalVolumeView>> {
    await this.gate;
    this.failIfAsked();
    return page(
      this.externalVolumes.filter((v) => options.pluginId === undefined || v.pluginId === options.pluginId),
      options,
    );
  }

  async detachVolume(volumeId: string, nodeId: string): Promise<VolumeDetachResult> {
    await this.gate;
    this.failIfAsked();
    const v = this.volumeOrThrow(volumeId);
    this.calls.push(`detachVolume ${volumeId} ${nodeId}`);
    const released = v.claims.map((c) => c.allocId);
    this.volumes.set(volumeId, { ...v, claims: [] });
    return { volumeId, nodeId, released };
  }

  async sweepClaims(): Promise<{ volumeId: string; allocId: string }[]> {
    return [];
  }

  // ---------------------------------------------------------------------------

  private addVolume(call: string, spec: VolumeSpec, externalId: string): VolumeView {
    if (this.volumes.has(spec.id)) throw new FakeVolumeExistsError(spec.id);
    this.calls.push(`${call} ${spec.id}`);
    const view: VolumeView = {
      ...spec,
      externalId,
      ...(spec.capacityMin !== undefined ? { capacityBytes: spec.capacityMin } : {}),
      schedulable: true,
      claims: [],
      createdAt: this.clock.now(),
    };
    this.volumes.set(spec.id, view);
    this.emit({
      topic: 'Volume',
      type: 'VolumeRegistered',
      message: `volume ${spec.id} registered`,
      volumeId: spec.id,
      pluginId: spec.pluginId,
    });
    return view;
  }

  private volumeOrThrow(id: string): VolumeView {
    const v = this.volumes.get(id);
    if (!v) throw new FakeVolumeNotFoundError(id);
    return v;
  }

  private makeAlloc(job: JobSpec, groupName: string, index: number, jobVersion: number): AllocView {
    const id = fakeUuid(++this.allocCounter);
    const now = this.clock.now();
    const group = job.groups.find((g) => g.name === groupName)!;
    const tasks: Record<string, TaskState> = {};
    for (const t of group.tasks) {
      tasks[t.name] = {
        state: 'running',
        failed: false,
        restarts: 0,
        startedAt: now,
        events: [
          { type: 'Received', message: 'Task received by client', time: now },
          { type: 'Started', message: 'Task started by client', time: now },
        ],
      };
    }
    const volumes: Record<string, MountedVolume> = {};
    // A per_alloc volume is the alloc's own, "<source>[<index>]", as the agent mounts it.
    for (const v of requestsOfAlloc(group.volumes, index)) {
      const cat = this.volumes.get(v.source);
      volumes[v.name] = {
        name: v.name,
        volumeId: v.source,
        pluginId: cat?.pluginId ?? 'unknown',
        hostPath: `/var/lib/csiplug/csi/per-alloc/${id}/${v.source}/rw-file-system`,
        readOnly: v.readOnly,
      };
      if (cat)
        cat.claims.push({
          allocId: id,
          mode: v.readOnly ? 'read' : 'write',
          accessMode: v.accessMode,
          attachmentMode: v.attachmentMode,
          since: now,
        } satisfies VolumeClaimView);
    }
    return {
      id,
      jobId: job.id,
      group: groupName,
      index,
      name: `${job.id}.${groupName}[${index}]`,
      job,
      jobVersion,
      desiredStatus: 'run',
      clientStatus: 'running',
      createdAt: now,
      tasks,
      volumes,
    };
  }

  private stopAllocs(job: JobView): void {
    for (const ref of job.allocs) {
      const alloc = this.allocs.get(ref.id);
      if (alloc) this.stopAlloc(job, alloc);
    }
  }

  private stopAlloc(job: JobView, alloc: AllocView): void {
    if (alloc.desiredStatus === 'stop') return;
    const now = this.clock.now();
    const ref = job.allocs.find((a) => a.id === alloc.id);
    alloc.desiredStatus = 'stop';
    alloc.clientStatus = 'complete';
    if (ref) Object.assign(ref, { desiredStatus: 'stop', clientStatus: 'complete' });
    for (const state of Object.values(alloc.tasks)) {
      state.state = 'dead';
      state.finishedAt = now;
      state.exitCode = 0;
      state.events.push({ type: 'Killed', message: 'Task successfully killed', time: now });
    }
    for (const v of this.volumes.values()) v.claims = v.claims.filter((c) => c.allocId !== alloc.id);
  }
}

/** A stable, uuid-shaped id for the n-th alloc (distinct prefixes, as real ids have). */
export function fakeUuid(n: number): string {
  const h = createHash('sha1').update(`alloc-${n}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** One page of `items` as a plugin pages them: `nextToken` is the index to go on from. */
function page<T>(items: T[], options: { perPage?: number; nextToken?: string }): Page<T> {
  const start = options.nextToken ? Number(options.nextToken) : 0;
  const end = options.perPage ? start + options.perPage : items.length;
  return { items: items.slice(start, end), ...(end < items.length ? { nextToken: String(end) } : {}) };
}

/** The secrets and parameters of a call, copied (absent when not given). */
function copiesOf(options: { secrets?: Record<string, string>; parameters?: Record<string, string> }): {
  secrets?: Record<string, string>;
  parameters?: Record<string, string>;
} {
  return {
    ...(options.secrets ? { secrets: { ...options.secrets } } : {}),
    ...(options.parameters ? { parameters: { ...options.parameters } } : {}),
  };
}
