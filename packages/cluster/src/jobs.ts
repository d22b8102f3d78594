// Jobs and their placements, in etcd:
//   jobs/<id>                 the job: type, version, when it was last
//                             submitted or stopped (a submit of the same spec
//                             keeps the version and changes only that), what
//                             each group needs (for the scheduler) and the
//                             spec itself (opaque here: the agent's JobSpec);
//                             `stopped` once stopped, a tombstone once purged
//                             (on an etcd lease of a day: etcd deletes it,
//                             no agent's clock is compared with another's);
//   placements/<id>/<slot>    one alloc slot and the node it runs on
//                             (scheduler.ts);
//   down/<node>               when a node was first seen down (its alive key
//                             gone), and whether its claims were released;
//   grace/<node>              written with the down mark, on a lease as long
//                             as the disconnect grace: etcd measures the
//                             grace, so no two agents' clocks need agree;
//   sched/epoch               bumped by every pass that writes placements and
//                             compared by each: passes are serialised, so a
//                             decision is never committed over another made
//                             from the same reads;
//   pending/<id>              the slots no node could take at the last pass,
//                             and why (for `job status`).
// A pass (`reconcile`) reads all of it, releases the claims of nodes down
// past the grace (only while their lease is still gone), runs the scheduler
// and commits what it decided in transactions that compare every revision
// it read: the epoch, each job's key, each slot written or deleted, and the
// alive keys it relied on (a node placed on is alive, a node moved off is
// not). A pass that lost a race writes nothing more and the next pass (any
// agent's) reads again. Every agent runs passes; none needs to lead.
// Records are checked as they are read: one that is not what this module
// writes, or a job over a submission's limits (record-limits.ts), is left
// out and said once per revision (a job's slots are then left alone, a bad
// slot is deleted), never allowed to stop every pass.
import { ConflictError, CsiplugError, errorMessage, type Logger } from '@csiplug/core';
import type { IKeyValue, Watcher } from 'etcd3';
import { EtcdVolumeClaims, type ClusterClaim } from './claims';
import { isEtcdAway, type EtcdConnection } from './connect';
import { EtcdClusterVolumes } from './cluster-volumes';
import type { ClusterNodeView } from './node-registry';
import { MAX_JOB_RECORD_BYTES, clusterAllocLimit } from './record-limits';
import {
  schedule,
  type ClusterJobType,
  type GroupDemand,
  type Placement,
  type SchedJob,
  type SchedVolume,
  type SchedulerResult,
  type Unplaced,
} from './scheduler';

const JOBS = 'jobs/';
const PLACEMENTS = 'placements/';
const DOWN = 'down/';
const GRACE = 'grace/';
const ALIVE = 'alive/';
const PENDING = 'pending/';
const EPOCH = 'sched/epoch';
/** At most this many slots are named per pending reason (the rest are counted): a value etcd accepts whatever the count. */
const PENDING_SLOTS_NAMED = 10;
/** The most slots one group may ask for (a record asking more is not read). */
export const MAX_GROUP_COUNT = 100_000;
/**
 * How long a purged job's tombstone is kept, so a node away meanwhile still
 * purges its allocs: the tombstone is on an etcd lease this long, and etcd
 * deletes it when the lease runs out — no agent's clock is read for it.
 */
export const TOMBSTONE_TTL_SECONDS = 24 * 3_600;
/** etcd's default --max-txn-ops is 128, for compares and for writes: each write here carries up to three compares (its slot, its job, a node's alive key) plus the epoch's. */
const OPS_PER_TXN = 40;

export interface ClusterJobRecord<S = unknown> {
  id: string;
  type: ClusterJobType;
  /** 0 for the first, one more on each change. */
  version: number;
  stopped: boolean;
  /** Set on the tombstone a purge leaves: the job is gone, and every node purges its allocs. */
  purged?: boolean;
  submittedAt: number;
  groups: GroupDemand[];
  spec: S;
}

export interface JobSubmitResult<S> {
  record: ClusterJobRecord<S>;
  /** The same spec was already the job's, running: the same version, with a new submit time (every node runs its share again). */
  unchanged: boolean;
}

/** Slots of one group no node can take now, for one set of reasons (as `job status` shows them). */
export interface PendingSlots {
  group: string;
  /** How many slots. */
  count: number;
  /** The first few of them. */
  slots: string[];
  /** Node name → why not there ("etcd" when the job waits for etcd; empty when no node is ready). */
  reasons: Record<string, string>;
}

export interface ClusterJobStatus<S = unknown> {
  record: ClusterJobRecord<S>;
  placements: Placement[];
  pending: PendingSlots[];
}

/** The unplaced slots of one job, grouped by group and reasons, a few named each. */
export function summarisePending(unplaced: readonly Unplaced[]): PendingSlots[] {
  const byKey = new Map<string, PendingSlots>();
  for (const u of unplaced) {
    const key = `${u.group}\u0000${JSON.stringify(Object.entries(u.reasons).sort())}`;
    const entry = byKey.get(key) ?? { group: u.group, count: 0, slots: [], reasons: u.reasons };
    entry.count++;
    if (entry.slots.length < PENDING_SLOTS_NAMED) entry.slots.push(u.slot);
    byKey.set(key, entry);
  }
  return [...byKey.values()];
}

/** etcd did not answer a job call: nothing was changed; try again (the API answers 503 for its code). */
export class ClusterJobsUnavailableError extends CsiplugError {
  constructor(what: string, cause: unknown) {
    super(
      'ECLUSTER_UNAVAILABLE',
      `${what}: the cluster's etcd did not answer (${errorMessage(cause)}); nothing was changed, try again once it does`,
      { cause },
    );
  }
}

export interface ReconcileOptions {
  nodes: ClusterNodeView[];
  /** This agent's clock: written into what it places (for people to read), never compared with a time another machine wrote. */
  now: number;
  /** This agent's limits { max_allocs_per_job }: counts for a node whose record does not say its own (record-limits.ts). */
  maxAllocsPerJob?: number;
  /** Aborted: the pass stops at its next step (the agent is shutting down); what it committed stands, the rest is the next pass's. */
  signal?: AbortSignal;
  disconnectGraceMs: number;
  /** Told of each node whose claims were released after its grace ended. */
  onNodeReleased?: (node: string, volumes: string[]) => void;
  /**
   * Before a node down past its grace gives up its claims: the claims it
   * held that were published to it (ControllerPublishVolume), for the caller
   * to unpublish through a controller of the plugin — the node may never
   * come back to do it. Failures are the caller's to say; the release goes on.
   */
  beforeRelease?: (node: string, published: Array<{ volumeId: string; claim: ClusterClaim }>) => Promise<boolean>;
}

export interface ReconcileResult<S = unknown> extends SchedulerResult {
  /** Chunks whose compare failed (another pass wrote first): the next pass reads again. */
  conflicts: number;
  /** The job records the pass read (readable ones), and the placements as they are after its commits. */
  records: ClusterJobRecord<S>[];
  placements: Placement[];
}

/**
 * A logger's words about bad records, each said once per record, revision
 * and problem (a pass reads every record each second: the same bad one
 * would be said every second otherwise; written again, it is said again).
 */
class RecordWarnings {
  private readonly said = new Set<string>();
  constructor(private readonly logger: Logger) {}

  warn(message: string, key: string, problem: string, revision?: string, level: 'warn' | 'error' = 'warn'): void {
    const id = `${key}\u0000${revision ?? ''}\u0000${problem}`;
    if (this.said.has(id)) return;
    if (this.said.size >= 10_000) this.said.clear();
    this.said.add(id);
    this.logger[level](message, { key, error: problem, ...(revision !== undefined ? { revision } : {}) });
  }
}

function parse<T>(key: string, text: string, warnings: RecordWarnings): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    warnings.warn('a record in etcd cannot be read; it is left out', key, errorMessage(err));
    return undefined;
  }
}

const isStr = (x: unknown): x is string => typeof x === 'string' && x.length > 0;
const isCount = (x: unknown, max: number): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0 && x <= max;

/**
 * Why a job record is not one this module wrote, or undefined when it is.
 * `maxAllocs`: the most allocs the job may ask of the cluster (record-limits.ts), when known.
 */
function jobRecordProblem(r: Partial<ClusterJobRecord> | null, id: string, maxAllocs?: number): string | undefined {
  if (r === null || typeof r !== 'object') return 'not an object';
  if (r.id !== id) return `its id ${JSON.stringify(r.id)} is not its key's ("${id}")`;
  if (r.type !== 'service' && r.type !== 'system') return `type ${JSON.stringify(r.type)} is not service or system`;
  if (!isCount(r.version, Number.MAX_SAFE_INTEGER)) return 'version is not a whole number';
  if (typeof r.stopped !== 'boolean') return 'stopped is not true or false';
  if (!Array.isArray(r.groups)) return 'groups is not a list';
  for (const g of r.groups as Array<Partial<GroupDemand> | null>) {
    if (g === null || typeof g !== 'object' || !isStr(g.name)) return 'a group has no name';
    if (!isCount(g.count, MAX_GROUP_COUNT)) return `group "${g.name}": count is not a whole number up to ${MAX_GROUP_COUNT}`;
    if (!Array.isArray(g.drivers) || !g.drivers.every(isStr)) return `group "${g.name}": drivers is not a list of names`;
    if (
      !Array.isArray(g.volumes) ||
      !g.volumes.every(
        (v) => v !== null && typeof v === 'object' && isStr(v.volumeId) && isStr(v.accessMode) && typeof v.readOnly === 'boolean',
      )
    ) {
      return `group "${g.name}": volumes is not a list of volume requests`;
    }
    if (g.datacenters !== undefined && !(Array.isArray(g.datacenters) && g.datacenters.every(isStr)))
      return `group "${g.name}": datacenters is not a list of names`;
  }
  const wanted = (r.groups as GroupDemand[]).reduce((n, g) => n + g.count, 0);
  // A stopped (or purged) job asks a pass only to remove its slots, whatever its counts: held to the limit, a job placed while
  // the cluster was bigger (a node purged since, a limit lowered) could never be stopped.
  if (maxAllocs !== undefined && !r.stopped && !r.purged && wanted > maxAllocs) {
    return `it asks for ${wanted} allocs (${(r.groups as GroupDemand[]).map((g) => `${g.name}: ${g.count}`).join(', ')}); the cluster's nodes run at most ${maxAllocs} of a job in all (limits { max_allocs_per_job } times the nodes), and a job run asking more is refused`;
  }
  return undefined;
}

/** A placement as this module writes it, its job and slot taken from its key; undefined when the body does not agree. */
function parsePlacement(key: string, text: string): Placement | undefined {
  const rest = key.slice(PLACEMENTS.length);
  const cut = rest.indexOf('/');
  if (cut <= 0) return undefined;
  const jobId = rest.slice(0, cut);
  const slot = rest.slice(cut + 1);
  let p: Partial<Placement> | null;
  try {
    p = JSON.parse(text) as Partial<Placement> | null;
  } catch {
    return undefined;
  }
  if (
    p === null ||
    typeof p !== 'object' ||
    p.jobId !== jobId ||
    p.slot !== slot ||
    !isStr(p.group) ||
    !isStr(p.node) ||
    !isCount(p.index, MAX_GROUP_COUNT)
  )
    return undefined;
  if (
    !isCount(p.jobVersion, Number.MAX_SAFE_INTEGER) ||
    typeof p.placedAt !== 'number' ||
    (p.movedFrom !== undefined && !isStr(p.movedFrom))
  )
    return undefined;
  if (slot !== `${p.group}/${p.index}` && slot !== `${p.group}/@${p.node}`) return undefined;
  return p as Placement;
}

export class EtcdJobs<S = unknown> {
  readonly claims: EtcdVolumeClaims;
  readonly volumes: EtcdClusterVolumes;

  constructor(
    private readonly conn: EtcdConnection,
    private readonly logger: Logger,
    now: () => number = Date.now,
    private readonly options: {
      tombstoneTtlSeconds?: number;
      /**
       * The agent's one handle on the claims in etcd (its node's identity on
       * every claim it writes): a pass releases a node's claims through it.
       * Absent (tools, tests): a handle of no node's own.
       */
      claims?: EtcdVolumeClaims;
      /**
       * How a pass releases the claims of a node down past its grace: in an
       * agent, through its ClusterVolumeClaimer (the one writer of claims in
       * etcd; it releases another node's claims on that node's missing
       * lease, as a purge does). Absent (tools, tests): the claims handle.
       */
      releaseNode?: (name: string) => Promise<string[]>;
    } = {},
  ) {
    this.claims = options.claims ?? new EtcdVolumeClaims(conn, now);
    this.volumes = new EtcdClusterVolumes(conn, logger);
    this.warnings = new RecordWarnings(logger);
  }

  private readonly warnings: RecordWarnings;

  private async call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof Error && isEtcdAway(err)) throw new ClusterJobsUnavailableError(what, err);
      throw err;
    }
  }

  private async readJob(id: string): Promise<{ record: ClusterJobRecord<S> | undefined; mod: string | undefined }> {
    const kv = (await this.conn.kv.get(JOBS + id).exec()).kvs[0];
    if (!kv) return { record: undefined, mod: undefined };
    // The key as asked for: etcd3 hands back a single get's key with the namespace's prefix still on (a range's without).
    return { record: this.jobRecord(JOBS + id, kv), mod: kv.mod_revision };
  }

  /**
   * A job record as read (its key without the namespace's prefix), or
   * undefined (said once per revision) when it is not one this module wrote
   * or asks for more than a submission may (`maxAllocs`, record-limits.ts).
   */
  private jobRecord(key: string, kv: IKeyValue, maxAllocs?: number): ClusterJobRecord<S> | undefined {
    const skip = (problem: string) => {
      this.warnings.warn(
        'a job record in etcd is not one csiplug wrote or is over a limit; the job is left as it is (its slots untouched) until it is run again (csiplug job run)',
        key,
        problem,
        kv.mod_revision,
        'error',
      );
      return undefined;
    };
    // Measured before it is parsed: a record's size bounds what reading it costs.
    if (kv.value.length > MAX_JOB_RECORD_BYTES)
      return skip(`it is ${kv.value.length} bytes, over the ${MAX_JOB_RECORD_BYTES} a job record may take`);
    let r: Partial<ClusterJobRecord<S>> | null;
    try {
      r = JSON.parse(kv.value.toString()) as Partial<ClusterJobRecord<S>> | null;
    } catch (err) {
      return skip(`it is not JSON: ${errorMessage(err)}`);
    }
    const problem = jobRecordProblem(r, key.slice(JOBS.length), maxAllocs);
    return problem ? skip(problem) : (r as ClusterJobRecord<S>);
  }

  /**
   * Stores the job (a new version when the spec changed, or when it was
   * stopped). Compare-and-swap on the job's key: a submit that lost a race
   * to another reads again.
   */
  submit(id: string, type: ClusterJobType, groups: GroupDemand[], spec: S, now: number): Promise<JobSubmitResult<S>> {
    return this.call(`job "${id}"`, async () => {
      for (let attempt = 0; attempt < 8; attempt++) {
        const { record: old, mod } = await this.readJob(id);
        const live = old && !old.purged;
        const same = live && !old.stopped && old.type === type && JSON.stringify(old.spec) === JSON.stringify(spec);
        // The same spec again is the same version, run again: its submit time changes, so every node runs its share again, and
        // a node's updater replaces what failed there — as `job run` of an unchanged file does on one agent.
        const record: ClusterJobRecord<S> = same
          ? { ...old, submittedAt: now }
          : { id, type, version: live ? old.version + 1 : 0, stopped: false, submittedAt: now, groups, spec };
        const txn = mod === undefined ? this.conn.kv.if(JOBS + id, 'Create', '==', 0) : this.conn.kv.if(JOBS + id, 'Mod', '==', mod);
        const res = await txn.then(this.conn.kv.put(JOBS + id).value(JSON.stringify(record))).commit();
        if (res.succeeded) return { record, unchanged: !!same };
      }
      throw new ConflictError(`job "${id}" kept changing while it was submitted (others submitting it at once); try again`);
    });
  }

  /**
   * Stops the job (its placements go at the next pass); a purge leaves a
   * tombstone, on a lease of a day, so every node purges its allocs.
   * Undefined: no such job.
   */
  stop(id: string, purge: boolean, now: number): Promise<ClusterJobRecord<S> | undefined> {
    return this.call(`job "${id}"`, async () => {
      for (let attempt = 0; attempt < 8; attempt++) {
        const { record: old, mod } = await this.readJob(id);
        if (!old || old.purged || mod === undefined) return undefined;
        const record: ClusterJobRecord<S> = { ...old, stopped: true, submittedAt: now, ...(purge ? { purged: true } : {}) };
        const res = purge
          ? await this.putTombstone(id, record, mod)
          : await this.conn.kv
              .if(JOBS + id, 'Mod', '==', mod)
              .then(this.conn.kv.put(JOBS + id).value(JSON.stringify(record)))
              .commit();
        if (res.succeeded) return record;
      }
      throw new ConflictError(`job "${id}" kept changing while it was stopped; try again`);
    });
  }

  /**
   * Writes a purged job's record on a new lease of the tombstone's length,
   * if its key is still at `mod`. The lease is not kept alive: etcd deletes
   * the tombstone when it runs out (a submit of the job meanwhile writes it
   * without a lease, and it stays). Lost the race: the lease is given back.
   */
  private async putTombstone(id: string, record: ClusterJobRecord<S>, mod: string) {
    const lease = this.conn.kv.lease(this.options.tombstoneTtlSeconds ?? TOMBSTONE_TTL_SECONDS, { autoKeepAlive: false });
    const leaseId = await lease.grant();
    const res = await this.conn.kv
      .if(JOBS + id, 'Mod', '==', mod)
      .then(
        this.conn.kv
          .put(JOBS + id)
          .value(JSON.stringify(record))
          .lease(leaseId),
      )
      .commit();
    if (res.succeeded) lease.release();
    else await lease.revoke().catch(() => undefined);
    return res;
  }

  /** Every job record, tombstones included. */
  async jobs(): Promise<ClusterJobRecord<S>[]> {
    const res = await this.call('jobs', () => this.conn.kv.getAll().prefix(JOBS).exec());
    return res.kvs.flatMap((kv) => this.jobRecord(kv.key.toString(), kv) ?? []);
  }

  async placements(): Promise<Placement[]> {
    return (await this.readPlacements()).map((p) => p.placement);
  }

  /** One job as the cluster holds it: its record, its placements and the slots pending. */
  async status(id: string): Promise<ClusterJobStatus<S> | undefined> {
    return this.call(`job "${id}"`, async () => {
      const { record } = await this.readJob(id);
      if (!record || record.purged) return undefined;
      const placements = (await this.readPlacements(id)).map((p) => p.placement);
      const pendingText = await this.conn.kv.get(PENDING + id).string();
      const parsed = pendingText ? parse<PendingSlots[]>(PENDING + id, pendingText, this.warnings) : undefined;
      const pending = Array.isArray(parsed)
        ? parsed.filter((x) => x !== null && typeof x === 'object' && typeof x.reasons === 'object' && x.reasons !== null)
        : [];
      return { record, placements, pending };
    });
  }

  private async readPlacements(jobId?: string): Promise<Array<{ placement: Placement; mod: string }>> {
    return (await this.readPlacementKvs(jobId)).good;
  }

  /** The placements, and the keys (with their revisions) whose bodies are not placements this module wrote. */
  private async readPlacementKvs(
    jobId?: string,
  ): Promise<{ good: Array<{ placement: Placement; mod: string }>; bad: Array<{ key: string; mod: string }> }> {
    const res = await this.conn.kv
      .getAll()
      .prefix(PLACEMENTS + (jobId ? `${jobId}/` : ''))
      .exec();
    const good: Array<{ placement: Placement; mod: string }> = [];
    const bad: Array<{ key: string; mod: string }> = [];
    for (const kv of res.kvs) {
      const key = kv.key.toString();
      const p = parsePlacement(key, kv.value.toString());
      if (p) good.push({ placement: p, mod: kv.mod_revision });
      else bad.push({ key, mod: kv.mod_revision });
    }
    return { good, bad };
  }

  /** Calls `onChange` on every change to jobs or placements (the watch reconnects by itself). */
  async watch(onChange: () => void): Promise<{ close(): Promise<void> }> {
    const watchers: Watcher[] = [];
    for (const prefix of [JOBS, PLACEMENTS]) {
      const w = await this.conn.kv.watch().prefix(prefix).create();
      w.on('data', () => onChange());
      w.on('error', () => undefined); // the watcher reconnects; a pass on a timer covers what it missed
      watchers.push(w);
    }
    return { close: async () => void (await Promise.all(watchers.map((w) => w.cancel().catch(() => undefined)))) };
  }

  /**
   * One scheduling pass over every job. Throws ClusterJobsUnavailableError
   * when etcd does not answer (nothing half-written: each chunk is one
   * transaction).
   */
  reconcile(options: ReconcileOptions): Promise<ReconcileResult<S>> {
    return this.call('scheduling', () => this.pass(options));
  }

  private async pass(options: ReconcileOptions): Promise<ReconcileResult<S>> {
    const { now, disconnectGraceMs, signal } = options;
    const kv = this.conn.kv;
    // A record may ask no more than a submission could: at most each node's max_allocs_per_job of a job in all.
    const maxAllocs = clusterAllocLimit(options.nodes, options.maxAllocsPerJob, MAX_GROUP_COUNT);
    const epochMod = (await kv.get(EPOCH).exec()).kvs[0]?.mod_revision;
    // The records and the revisions the commit compares, from one read: read apart, a job changed in between would be
    // planned from its old record and committed against its new revision.
    const jobKvs = (await kv.getAll().prefix(JOBS).exec()).kvs;
    const records: ClusterJobRecord<S>[] = [];
    const jobMods = new Map<string, string>();
    const unreadableJobs = new Set<string>();
    /** Tombstones written without a lease (by an older agent): put on one now. */
    const leaselessTombstones: ClusterJobRecord<S>[] = [];
    for (const j of jobKvs) {
      const id = j.key.toString().slice(JOBS.length);
      jobMods.set(id, j.mod_revision);
      const r = this.jobRecord(j.key.toString(), j, maxAllocs);
      if (r) records.push(r);
      else unreadableJobs.add(id);
      if (r?.purged && j.lease === '0') leaselessTombstones.push(r);
    }
    signal?.throwIfAborted();
    const { good: readAll, bad } = await this.readPlacementKvs();
    // A job whose record cannot be read keeps its slots as they are: nothing of it is planned.
    const read = readAll.filter((p) => !unreadableJobs.has(p.placement.jobId));
    for (const b of bad)
      this.logger.warn('a placement in etcd is not one csiplug wrote; it is deleted, and its slot placed again', { key: b.key });

    // Nodes: as listed, plus any node a slot names that has no record (deleted, unreadable): down.
    const nodes = [...options.nodes];
    for (const { placement } of read) {
      if (!nodes.some((n) => n.name === placement.node))
        nodes.push({
          name: placement.node,
          nodeClass: '',
          meta: {},
          drivers: [],
          plugins: [],
          version: '',
          registeredAt: 0,
          updatedAt: 0,
          status: 'down',
        });
    }

    // Down marks, and the grace etcd measures: a mark is made only while the node's alive key is absent, and goes only while it is there.
    const marks = new Map<string, { since: number; released: boolean; mod: string }>();
    for (const d of (await kv.getAll().prefix(DOWN).exec()).kvs) {
      const v = parse<{ since?: unknown; released?: unknown } | null>(d.key.toString(), d.value.toString(), this.warnings);
      marks.set(d.key.toString().slice(DOWN.length), {
        since: typeof v?.since === 'number' && Number.isFinite(v.since) ? v.since : now,
        released: v?.released === true,
        mod: d.mod_revision,
      });
    }
    const graceRunning = new Set((await kv.getAll().prefix(GRACE).keys()).map((k) => k.slice(GRACE.length)));
    const graceSeconds = Math.max(1, Math.ceil(disconnectGraceMs / 1000));
    for (const n of nodes) {
      if (n.status === 'down' && !marks.has(n.name)) {
        const lease = kv.lease(graceSeconds, { autoKeepAlive: false });
        const leaseId = await lease.grant();
        const res = await kv
          .if(ALIVE + n.name, 'Create', '==', 0)
          .and(DOWN + n.name, 'Create', '==', 0)
          .then(
            kv.put(DOWN + n.name).value(JSON.stringify({ since: now })),
            kv
              .put(GRACE + n.name)
              .value(String(now))
              .lease(leaseId),
          )
          .commit();
        lease.release(); // not kept alive: it runs out when the grace does
        if (res.succeeded) {
          marks.set(n.name, { since: now, released: false, mod: res.header.revision });
          graceRunning.add(n.name);
        }
      } else if (n.status === 'ready' && marks.has(n.name)) {
        await kv
          .if(ALIVE + n.name, 'Create', '>', 0)
          .then(kv.delete().key(DOWN + n.name), kv.delete().key(GRACE + n.name))
          .commit();
        marks.delete(n.name);
      }
    }
    const expired = nodes.filter((n) => n.status === 'down' && marks.has(n.name) && !graceRunning.has(n.name)).map((n) => n.name);
    // A node down past its grace gives up its claims first (only while its lease is still gone), once, so its work can move.
    for (const name of expired) {
      const mark = marks.get(name)!;
      if (mark.released) continue;
      if (options.beforeRelease) {
        const published = (await this.claims.all()).flatMap(({ volumeId, claims }) =>
          claims.filter((c) => c.nodeId === name && c.published).map((claim) => ({ volumeId, claim })),
        );
        // False: this agent cannot unpublish them (no controller here while another node has one, or the node is back): the release
        // waits for a pass that can.
        if (published.length && !(await options.beforeRelease(name, published).catch(() => true))) continue;
      }
      const released = await (this.options.releaseNode ?? ((n: string) => this.claims.releaseNode(n)))(name);
      if (released.length) options.onNodeReleased?.(name, released);
      // Marked released only while the node is still gone: back meanwhile, releaseNode changed nothing, and the mark must not
      // say otherwise (the node going down again before a pass sees it ready would keep its claims for ever).
      await kv
        .if(DOWN + name, 'Mod', '==', mark.mod)
        .and(ALIVE + name, 'Create', '==', 0)
        .then(kv.put(DOWN + name).value(JSON.stringify({ since: mark.since, released: true })))
        .commit();
    }

    const volumes = await this.volumes.list();
    const { volumes: claimList, unreadable } = await this.claims.allWithUnreadable();
    const claims: Record<string, ClusterClaim[]> = {};
    for (const { volumeId, claims: c } of claimList) claims[volumeId] = c;
    const schedVolumes: Record<string, SchedVolume> = {};
    // A volume still being made (its id reserved) is not there yet for any placement.
    for (const v of volumes.filter((x) => x.state !== 'creating')) {
      schedVolumes[v.id] = {
        id: v.id,
        pluginId: v.pluginId,
        ...(v.accessibleTopology ? { accessibleTopology: v.accessibleTopology } : {}),
        ...(v.capabilities ? { capabilities: v.capabilities } : {}),
      };
    }
    const jobs: SchedJob[] = records.map((r) => ({
      id: r.id,
      type: r.type,
      version: r.version,
      stopped: r.stopped || !!r.purged,
      groups: r.groups,
    }));
    signal?.throwIfAborted();
    const result = schedule({
      jobs,
      placements: read.map((p) => p.placement),
      nodes,
      downSince: {},
      volumes: schedVolumes,
      claims,
      now,
      disconnectGraceMs,
      expired,
      unreadableClaims: unreadable,
    });

    const readByKey = new Map(read.map((p) => [`${p.placement.jobId}/${p.placement.slot}`, p.placement]));
    const modOf = new Map(read.map((p) => [`${p.placement.jobId}/${p.placement.slot}`, p.mod]));
    const readyNodes = new Set(nodes.filter((n) => n.status === 'ready').map((n) => n.name));
    type Write = { jobId: string; key: string; mod: string | undefined; value?: string; alive?: string; gone?: string };
    // A bad key whose slot is placed again is written over, on its revision: a transaction takes one op per key.
    const badMods = new Map(bad.map((b) => [b.key.slice(PLACEMENTS.length), b.mod]));
    const putKeys = new Set(result.put.map((p) => `${p.jobId}/${p.slot}`));
    const writes: Write[] = [
      ...[...badMods].filter(([key]) => !putKeys.has(key)).map(([key, mod]) => ({ jobId: '', key, mod })),
      ...result.remove.map((p) => ({ jobId: p.jobId, key: `${p.jobId}/${p.slot}`, mod: modOf.get(`${p.jobId}/${p.slot}`) })),
      ...result.put.map((p) => {
        const before = readByKey.get(`${p.jobId}/${p.slot}`);
        const moved = before && before.node !== p.node ? before.node : undefined;
        return {
          jobId: p.jobId,
          key: `${p.jobId}/${p.slot}`,
          mod: modOf.get(`${p.jobId}/${p.slot}`) ?? badMods.get(`${p.jobId}/${p.slot}`),
          value: JSON.stringify(p),
          // Placed on a node that is alive at commit; moved off one that is still not (a node back meanwhile keeps its slot).
          ...(readyNodes.has(p.node) ? { alive: p.node } : {}),
          ...(moved && !readyNodes.has(moved) ? { gone: moved } : {}),
        };
      }),
    ];
    let conflicts = 0;
    let epoch = epochMod;
    const committed: Write[] = [];
    for (let i = 0; i < writes.length; i += OPS_PER_TXN) {
      // Between transactions: an agent shutting down stops here (what was committed stands; the next pass reads it).
      signal?.throwIfAborted();
      const chunk = writes.slice(i, i + OPS_PER_TXN);
      // The epoch first: no other pass committed since this one read (or since its own last chunk).
      let txn = epoch === undefined ? kv.if(EPOCH, 'Create', '==', 0) : kv.if(EPOCH, 'Mod', '==', epoch);
      for (const w of chunk) txn = txn.and(PLACEMENTS + w.key, w.mod === undefined ? 'Create' : 'Mod', '==', w.mod ?? 0);
      for (const jobId of new Set(chunk.map((w) => w.jobId).filter(Boolean))) {
        const mod = jobMods.get(jobId);
        txn = mod === undefined ? txn.and(JOBS + jobId, 'Create', '==', 0) : txn.and(JOBS + jobId, 'Mod', '==', mod);
      }
      for (const node of new Set(chunk.flatMap((w) => (w.alive ? [w.alive] : [])))) txn = txn.and(ALIVE + node, 'Create', '>', 0);
      for (const node of new Set(chunk.flatMap((w) => (w.gone ? [w.gone] : [])))) txn = txn.and(ALIVE + node, 'Create', '==', 0);
      const ops = chunk.map((w) =>
        w.value === undefined ? kv.delete().key(PLACEMENTS + w.key) : kv.put(PLACEMENTS + w.key).value(w.value),
      );
      const res = await txn.then(kv.put(EPOCH).value(String(now)), ...ops).commit();
      if (!res.succeeded) {
        // The rest was planned on this chunk's being written: none of it is; the next pass reads again.
        conflicts++;
        break;
      }
      epoch = res.header.revision;
      committed.push(...chunk);
    }
    // The placements as they are now (as far as this pass wrote).
    const after = new Map(read.map((p) => [`${p.placement.jobId}/${p.placement.slot}`, p.placement]));
    const putByKey = new Map(result.put.map((p) => [`${p.jobId}/${p.slot}`, p]));
    for (const w of committed) {
      if (w.value === undefined) after.delete(w.key);
      else after.set(w.key, putByKey.get(w.key)!);
    }
    // What could not be placed, per job, for `job status`: written by a pass whose decisions all stood, and only when it changed.
    if (conflicts === 0) {
      const pendingByJob = new Map<string, Unplaced[]>();
      for (const u of result.unplaced) {
        const list = pendingByJob.get(u.jobId);
        if (list) list.push(u);
        else pendingByJob.set(u.jobId, [u]);
      }
      const pendingNow = await kv.getAll().prefix(PENDING).strings();
      const known = new Set(jobMods.keys());
      for (const r of records) {
        const text = pendingByJob.has(r.id) ? JSON.stringify(summarisePending(pendingByJob.get(r.id)!)) : undefined;
        if (text === pendingNow[PENDING + r.id]) continue;
        if (text === undefined) await kv.delete().key(PENDING + r.id);
        else await kv.put(PENDING + r.id).value(text);
      }
      for (const key of Object.keys(pendingNow)) if (!known.has(key.slice(PENDING.length))) await kv.delete().key(key);
    }
    // A purged job's tombstone goes when its lease of a day runs out (etcd measures it: no two machines' clocks are compared; a node
    // away that long finds no record of the job, and its agent warns of the allocs it still holds rather than guessing). One an
    // older agent wrote without a lease is put on one now: it goes a day from now.
    for (const r of leaselessTombstones) {
      const mod = jobMods.get(r.id);
      if (mod !== undefined) await this.putTombstone(r.id, r, mod);
    }
    // Placements of jobs whose record cannot be read are as they were.
    const placements = [...after.values(), ...readAll.filter((p) => unreadableJobs.has(p.placement.jobId)).map((p) => p.placement)];
    return { ...result, conflicts, records, placements };
  }
}
