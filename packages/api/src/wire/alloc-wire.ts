// Allocations and their logs on Nomad's wire (api/allocations.go,
// api/tasks.go, api/fs.go): the AllocView of service.ts as Nomad's
// Allocation and AllocationListStub, its task states as TaskState with
// TaskEvents, and a log range as Nomad's StreamFrames. encode* is what the
// routes answer, decode* is how the ApiClient reads it back into the same
// view. csiplug's own (an alloc's mounted volumes, its index in the group,
// the job's latest deployment, a task's exit code) rides in `Csiplug`.
// Pure functions: no server imports here, the client imports this file.
import type { MountedVolume } from '@csiplug/hooks';
import { type Deployment, type NomadJob, type TaskState, jobFromNomadJson, jobToNomadJson } from '@csiplug/jobspec';
import type { AllocView } from '../service';
import { goTimeToMs, msToGoTime, msToUnixNano, unixNanoToMs } from './nomad-time';

/** Nomad's namespace for everything: csiplug has no namespaces, as a Nomad without them answers. */
const NAMESPACE = 'default';

/** api.TaskEvent (the fields csiplug knows; Message and DisplayMessage both carry the event's text). */
export interface NomadTaskEvent {
  Type: string;
  /** Unix nanoseconds. */
  Time: number;
  DisplayMessage: string;
  Message: string;
  Details?: Record<string, string>;
  /** Set when csiplug marks the event as the one that failed the task. */
  FailsTask?: boolean;
}

/** api.TaskState; LastRestart is left out (csiplug does not keep it). */
export interface NomadTaskState {
  State: TaskState['state'];
  Failed: boolean;
  Restarts: number;
  StartedAt: string;
  FinishedAt: string;
  Events: NomadTaskEvent[];
  /** What the task's last exit was, which Nomad only tells in its Terminated event's fields. */
  Csiplug?: { exitCode?: number | null; signal?: string | null };
}

/** api.AllocDeploymentStatus; Canary and ModifyIndex are left out (csiplug has no canaries and keeps no index for it). */
export interface NomadAllocDeploymentStatus {
  Healthy: boolean;
  Timestamp: string;
  /** Why the deployment found the alloc unhealthy. */
  Csiplug?: { reason: string };
}

/** What csiplug adds to an alloc, list stub or full: the view's fields Nomad has none for. */
export interface AllocCsiplugFields<D = Deployment> {
  /** The alloc's index in its group's count. */
  index: number;
  /** The group's volumes as the alloc's tasks see them, by the group's volume name. */
  volumes: Record<string, MountedVolume>;
  /** The job's latest deployment (each alloc of the job carries it; the newest wins). */
  jobDeployment?: D;
}

/** A deployment as a list stub carries it: without the copies of the job (which hold its templates, env and secrets). */
export type DeploymentStub = Omit<Deployment, 'job' | 'revertTo'> & { revertTo?: { version: number } };

/**
 * An alloc as a list gives it (ApiClient.listAllocs, jobAllocations): the
 * view without the job it runs, nor the job's copies in its deployment; a
 * list answers everyone who may list, so it carries no job (read it with
 * getAlloc or getJob).
 */
export type AllocStubView = Omit<AllocView, 'job' | 'jobDeployment'> & { jobDeployment?: DeploymentStub };

/** api.AllocationMetric, as far as csiplug can tell it honestly: one node (this one) was looked at and took the alloc. */
export interface NomadAllocationMetric {
  NodesEvaluated: number;
  NodesFiltered: number;
  NodesInPool: number;
  NodesAvailable: Record<string, number>;
  ClassFiltered: Record<string, number>;
  ConstraintFiltered: Record<string, number>;
  NodesExhausted: number;
  ClassExhausted: Record<string, number>;
  DimensionExhausted: Record<string, number>;
  QuotaExhausted: string[];
  ResourcesExhausted: Record<string, unknown>;
  Scores: Record<string, number>;
  ScoreMetaData: unknown[];
  AllocationTime: number;
  CoalescedFailures: number;
}

/** api.Job as an alloc carries it: the job version the alloc runs. */
export type NomadAllocJob = NomadJob & { Version?: number };

/** api.AllocationListStub (the fields csiplug knows). */
export interface NomadAllocationListStub {
  ID: string;
  Name: string;
  Namespace: string;
  NodeID?: string;
  NodeName?: string;
  JobID: string;
  JobType: string;
  JobVersion: number;
  TaskGroup: string;
  DesiredStatus: AllocView['desiredStatus'];
  ClientStatus: AllocView['clientStatus'];
  TaskStates: Record<string, NomadTaskState>;
  DeploymentStatus?: NomadAllocDeploymentStatus;
  /** Unix nanoseconds. */
  CreateTime: number;
  /** Unix nanoseconds: the latest task event's time, else CreateTime. */
  ModifyTime: number;
  /** The stub has no DeploymentID: it rides here. No job: a list carries none (see AllocStubView). */
  Csiplug: AllocCsiplugFields<DeploymentStub> & { deploymentId?: string };
}

/** api.Allocation (the fields csiplug knows). */
export interface NomadAllocation {
  ID: string;
  Namespace: string;
  Name: string;
  NodeID?: string;
  NodeName?: string;
  JobID: string;
  Job: NomadAllocJob;
  TaskGroup: string;
  DesiredStatus: AllocView['desiredStatus'];
  ClientStatus: AllocView['clientStatus'];
  TaskStates: Record<string, NomadTaskState>;
  DeploymentID?: string;
  DeploymentStatus?: NomadAllocDeploymentStatus;
  /** Unix nanoseconds. */
  CreateTime: number;
  /** Unix nanoseconds: the latest task event's time, else CreateTime. */
  ModifyTime: number;
  /** This node took it: see NomadAllocationMetric (`nomad alloc status -verbose` reads it). */
  Metrics: NomadAllocationMetric;
  Csiplug: AllocCsiplugFields;
}

/** The node the allocs run on (this agent's), for NodeID and NodeName (and its datacenter, for Metrics). */
export interface AllocNode {
  id: string;
  name: string;
  datacenter?: string;
}

// Task states ----------------------------------------------------------------

function encodeTaskState(t: TaskState): NomadTaskState {
  const extra: NonNullable<NomadTaskState['Csiplug']> = {};
  if (t.exitCode !== undefined) extra.exitCode = t.exitCode;
  if (t.signal !== undefined) extra.signal = t.signal;
  return {
    State: t.state,
    Failed: t.failed,
    Restarts: t.restarts,
    StartedAt: msToGoTime(t.startedAt),
    FinishedAt: msToGoTime(t.finishedAt),
    Events: t.events.map((e) => ({
      Type: e.type,
      Time: msToUnixNano(e.time),
      DisplayMessage: e.message,
      Message: e.message,
      ...(e.details !== undefined ? { Details: e.details } : {}),
      ...(e.failed !== undefined ? { FailsTask: e.failed } : {}),
    })),
    ...(Object.keys(extra).length ? { Csiplug: extra } : {}),
  };
}

function decodeTaskState(w: NomadTaskState): TaskState {
  const state: TaskState = {
    state: w.State,
    failed: w.Failed,
    restarts: w.Restarts,
    events: (w.Events ?? []).map((e) => ({
      type: e.Type,
      message: e.DisplayMessage || e.Message || '',
      time: unixNanoToMs(e.Time),
      ...(e.FailsTask !== undefined ? { failed: e.FailsTask } : {}),
      ...(e.Details !== undefined ? { details: e.Details } : {}),
    })),
  };
  const startedAt = goTimeToMs(w.StartedAt);
  const finishedAt = goTimeToMs(w.FinishedAt);
  if (startedAt !== undefined) state.startedAt = startedAt;
  if (finishedAt !== undefined) state.finishedAt = finishedAt;
  if (w.Csiplug?.exitCode !== undefined) state.exitCode = w.Csiplug.exitCode;
  if (w.Csiplug?.signal !== undefined) state.signal = w.Csiplug.signal;
  return state;
}

const mapValues = <A, B>(record: Record<string, A>, f: (a: A) => B): Record<string, B> =>
  Object.fromEntries(Object.entries(record).map(([k, v]) => [k, f(v)]));

// Allocs ---------------------------------------------------------------------

function encodeDeploymentStatus(s: NonNullable<AllocView['deploymentStatus']>): NomadAllocDeploymentStatus {
  return { Healthy: s.healthy, Timestamp: msToGoTime(s.time), ...(s.reason !== undefined ? { Csiplug: { reason: s.reason } } : {}) };
}

function decodeDeploymentStatus(w: NomadAllocDeploymentStatus): NonNullable<AllocView['deploymentStatus']> {
  return {
    healthy: w.Healthy,
    time: goTimeToMs(w.Timestamp) ?? 0,
    ...(w.Csiplug?.reason !== undefined ? { reason: w.Csiplug.reason } : {}),
  };
}

function csiplugFields(a: AllocView): AllocCsiplugFields {
  return { index: a.index, volumes: a.volumes, ...(a.jobDeployment !== undefined ? { jobDeployment: a.jobDeployment } : {}) };
}

/** A deployment without its copies of the job. */
export function deploymentStub(d: Deployment): DeploymentStub {
  const { job: _job, revertTo, ...rest } = d;
  return { ...rest, ...(revertTo !== undefined ? { revertTo: { version: revertTo.version } } : {}) };
}

/** Nomad's ModifyTime as csiplug knows it: the latest task event's time, else the alloc's creation. */
function modifiedAt(a: AllocView): number {
  return Math.max(a.createdAt, ...Object.values(a.tasks).flatMap((t) => t.events.map((e) => e.time)));
}

/** The only placement metric csiplug can give honestly: this node, the one the alloc is on, was evaluated and took it. */
function thisNodeMetric(node: AllocNode | undefined): NomadAllocationMetric {
  return {
    NodesEvaluated: 1,
    NodesFiltered: 0,
    NodesInPool: 1,
    NodesAvailable: { [node?.datacenter ?? 'dc1']: 1 },
    ClassFiltered: {},
    ConstraintFiltered: {},
    NodesExhausted: 0,
    ClassExhausted: {},
    DimensionExhausted: {},
    QuotaExhausted: [],
    ResourcesExhausted: {},
    Scores: {},
    ScoreMetaData: [],
    AllocationTime: 0,
    CoalescedFailures: 0,
  };
}

/** The fields an Allocation and its list stub share. */
function commonFields(a: AllocView, node: AllocNode | undefined) {
  return {
    ID: a.id,
    Name: a.name,
    Namespace: NAMESPACE,
    ...(node ? { NodeID: node.id, NodeName: node.name } : {}),
    JobID: a.jobId,
    TaskGroup: a.group,
    DesiredStatus: a.desiredStatus,
    ClientStatus: a.clientStatus,
    TaskStates: mapValues(a.tasks, encodeTaskState),
    ...(a.deploymentStatus !== undefined ? { DeploymentStatus: encodeDeploymentStatus(a.deploymentStatus) } : {}),
    CreateTime: msToUnixNano(a.createdAt),
    ModifyTime: msToUnixNano(modifiedAt(a)),
  };
}

/** An alloc as Nomad's AllocationListStub (GET /v1/allocations, GET /v1/job/:id/allocations); `node`: the node it runs on. */
export function encodeAllocStub(a: AllocView, node?: AllocNode): NomadAllocationListStub {
  return {
    ...commonFields(a, node),
    JobType: a.job.type ?? 'service',
    // Nomad's JobVersion is a uint64: a job never updated is at 0.
    JobVersion: a.jobVersion ?? 0,
    Csiplug: {
      index: a.index,
      volumes: a.volumes,
      ...(a.jobDeployment !== undefined ? { jobDeployment: deploymentStub(a.jobDeployment) } : {}),
      ...(a.deploymentId !== undefined ? { deploymentId: a.deploymentId } : {}),
    },
  };
}

/** An alloc as Nomad's Allocation (GET /v1/allocation/:id), its Job the version it runs; `node`: the node it runs on. */
export function encodeAlloc(a: AllocView, node?: AllocNode): NomadAllocation {
  return {
    ...commonFields(a, node),
    Job: { ...jobToNomadJson(a.job), Version: a.jobVersion ?? 0 },
    ...(a.deploymentId !== undefined ? { DeploymentID: a.deploymentId } : {}),
    Metrics: thisNodeMetric(node),
    Csiplug: csiplugFields(a),
  };
}

/** The fields an Allocation and its list stub share, back to the view's. */
function decodeCommon(w: NomadAllocation | NomadAllocationListStub): Omit<AllocStubView, 'jobVersion' | 'deploymentId' | 'jobDeployment'> {
  // Only csiplug's agents send Csiplug: another server's answer is refused with what it lacks, not a TypeError.
  if (!w.Csiplug || typeof w.Csiplug !== 'object')
    throw new TypeError(`allocation ${w.ID ?? '(no ID)'} has no Csiplug field: the answer is not from a csiplug agent`);
  const view: Omit<AllocStubView, 'jobVersion' | 'deploymentId' | 'jobDeployment'> = {
    id: w.ID,
    jobId: w.JobID,
    group: w.TaskGroup,
    index: w.Csiplug.index,
    name: w.Name,
    desiredStatus: w.DesiredStatus,
    clientStatus: w.ClientStatus,
    createdAt: unixNanoToMs(w.CreateTime),
    tasks: mapValues(w.TaskStates ?? {}, decodeTaskState),
    volumes: w.Csiplug.volumes ?? {},
  };
  if (w.DeploymentStatus) view.deploymentStatus = decodeDeploymentStatus(w.DeploymentStatus);
  return view;
}

/** An AllocationListStub from this agent back to the view a list gives (no job: see AllocStubView). */
export function decodeAllocStub(w: NomadAllocationListStub): AllocStubView {
  const view: AllocStubView = { ...decodeCommon(w), jobVersion: w.JobVersion };
  if (w.Csiplug.deploymentId !== undefined) view.deploymentId = w.Csiplug.deploymentId;
  if (w.Csiplug.jobDeployment !== undefined) view.jobDeployment = w.Csiplug.jobDeployment;
  return view;
}

/** An Allocation from this agent back to the view; its job is read leniently (an answer, not a request to check). */
export function decodeAlloc(w: NomadAllocation): AllocView {
  const view: AllocView = { ...decodeCommon(w), job: jobFromNomadJson(w.Job, 'Job', { lenient: true }), jobVersion: w.Job.Version ?? 0 };
  if (w.DeploymentID !== undefined) view.deploymentId = w.DeploymentID;
  if (w.Csiplug.jobDeployment !== undefined) view.jobDeployment = w.Csiplug.jobDeployment;
  return view;
}

// Logs -----------------------------------------------------------------------

/**
 * api.StreamFrame as GET /v1/client/fs/logs answers without plain=true: one
 * JSON object per chunk of the log, one a line. Offset is the file offset
 * right after the frame's bytes (as Nomad's, in the file the bytes are in);
 * File is left out, FileEvent is only Nomad's "file truncated" (a followed
 * log that got shorter in place). `{}` is a heartbeat.
 */
export interface NomadStreamFrame {
  Offset?: number;
  /** The bytes, base64 (Go's []byte in JSON). */
  Data?: string;
  File?: string;
  FileEvent?: string;
}

/** One chunk of a log as its frame's line; `end`: the file offset right after the chunk. */
export function encodeLogFrame(chunk: Buffer, end: number): string {
  return `${JSON.stringify({ Offset: end, Data: chunk.toString('base64') } satisfies NomadStreamFrame)}\n`;
}

/** Nomad's frame for a log that got shorter than where the reader was: it is read again from its start. */
export function encodeLogTruncated(): string {
  return `${JSON.stringify({ FileEvent: 'file truncated' } satisfies NomadStreamFrame)}\n`;
}

/** Nomad's heartbeat frame, `{}`: sent on a followed log that had nothing to send for a second; readers skip it. */
export function encodeLogHeartbeat(): string {
  return `${JSON.stringify({} satisfies NomadStreamFrame)}\n`;
}

/** The bytes of a stream of frames (one JSON object a line; heartbeats, `{}`, carry none), in order. */
export function decodeLogFrames(text: string): Buffer {
  const parts: Buffer[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const frame = JSON.parse(line) as NomadStreamFrame;
    if (frame.Data) parts.push(Buffer.from(frame.Data, 'base64'));
  }
  return Buffer.concat(parts);
}

/**
 * Which bytes of a log range make whole UTF-8 characters, for the
 * ApiClient's AllocLogs (whose `data` is a string, so a cut character would
 * come out as U+FFFD and its bytes be lost to a reader that goes on from
 * nextOffset):
 *
 * - at the front, when the slice does not start the file, up to 3
 *   continuation bytes (the tail of a character cut by the range) are
 *   skipped, and `offset` says where the data really starts;
 * - at the back, an incomplete character is left out and nextOffset points
 *   at its first byte, so the next read gets it whole. When that would
 *   leave nothing, the limit is what cut it (a limit smaller than one
 *   character) and nothing was skipped either, the bytes are kept (as
 *   U+FFFD) so that a reader still moves on; at the end of the file an
 *   empty answer is right: the task is probably writing that character.
 *
 * Bytes that are simply not UTF-8 are not judged: they decode as U+FFFD,
 * and their byte count still moves nextOffset on. plain=true gives the
 * bytes exactly as they are.
 */
export function utf8Window(bytes: Buffer, midFile: boolean, cutByLimit: boolean): { skip: number; keep: number } {
  let skip = 0;
  if (midFile) while (skip < 3 && skip < bytes.length && isContinuation(bytes[skip]!)) skip++;
  let end = bytes.length;
  const partial = incompleteTail(bytes, skip);
  if (partial > 0 && (end - partial > skip || skip > 0 || !cutByLimit)) end -= partial;
  return { skip, keep: end - skip };
}

function isContinuation(b: number): boolean {
  return (b & 0xc0) === 0x80;
}

/** How many bytes at the end of `bytes` (not before `from`) are the start of a character that is not all there. */
function incompleteTail(bytes: Buffer, from: number): number {
  for (let back = 1; back <= 4 && bytes.length - back >= from; back++) {
    const b = bytes[bytes.length - back]!;
    if (isContinuation(b)) continue;
    const want = b >= 0xf8 ? 1 : b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return want > back ? back : 0;
  }
  return 0;
}
