// Jobs and their placements, in etcd:
//   jobs/<id>                 the job: type, version, what each group needs
//                             (for the scheduler) and the spec itself (opaque
//                             here: the agent's JobSpec); `stopped` once
//                             stopped, a tombstone once purged;
//   placements/<id>/<slot>    one alloc slot and the node it runs on
//                             (scheduler.ts);
//   down/<node>               when a node was first seen down (its alive key
//                             gone): the disconnect grace counts from it;
//   pending/<id>              the slots no node could take at the last pass,
//                             and why (for `job status`).
// A pass (`reconcile`) reads all of it, releases the claims of nodes down
// past the grace (only while their lease is still gone), runs the scheduler
// and commits what it decided in transactions that compare every revision
// it read: the job's key, and each slot written or deleted. A pass that lost
// a race writes nothing of that chunk and the next pass (any agent's) reads
// again. Every agent runs passes; none needs to lead.
import { CsiplugError, ValidationError, errorMessage, type Logger } from '@csiplug/core';
import type { IKeyValue, Watcher } from 'etcd3';
import { EtcdVolumeClaims, type ClusterClaim } from './claims';
import { isEtcdAway, type EtcdConnection } from './connect';
import { EtcdClusterVolumes } from './cluster-volumes';
import type { ClusterNodeView } from './node-registry';
import { schedule, type ClusterJobType, type GroupDemand, type Placement, type SchedJob, type SchedVolume, type SchedulerResult, type Unplaced } from './scheduler';

const JOBS = 'jobs/';
const PLACEMENTS = 'placements/';
const DOWN = 'down/';
const PENDING = 'pending/';
/** How long a purged job's tombstone is kept, so a node away meanwhile still purges its allocs. */
const TOMBSTONE_MS = 24 * 3_600_000;
/** etcd's default --max-txn-ops is 128; each write also carries a compare or two. */
const OPS_PER_TXN = 60;

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
  /** The same spec was already the job's, running: nothing changed. */
  unchanged: boolean;
}

export interface ClusterJobStatus<S = unknown> {
  record: ClusterJobRecord<S>;
  placements: Placement[];
  pending: Unplaced[];
}

/** etcd did not answer a job call: nothing was changed; try again. */
export class ClusterJobsUnavailableError extends CsiplugError {
  constructor(what: string, cause: unknown) {
    super('ECLUSTER_UNAVAILABLE', `${what}: the cluster's etcd did not answer (${errorMessage(cause)}); nothing was changed, try again once it does`, { cause });
  }
}

export interface ReconcileOptions {
  nodes: ClusterNodeView[];
  now: number;
  disconnectGraceMs: number;
  /** Told of each node whose claims were released after its grace ended. */
  onNodeReleased?: (node: string, volumes: string[]) => void;
}

export interface ReconcileResult extends SchedulerResult {
  /** Chunks whose compare failed (another pass wrote first): the next pass reads again. */
  conflicts: number;
}

function parse<T>(key: string, text: string, logger: Logger): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    logger.warn('a record in etcd cannot be read; it is left out', { key, error: errorMessage(err) });
    return undefined;
  }
}

export class EtcdJobs<S = unknown> {
  readonly claims: EtcdVolumeClaims;
  readonly volumes: EtcdClusterVolumes;

  constructor(
    private readonly conn: EtcdConnection,
    private readonly logger: Logger,
    now: () => number = Date.now,
  ) {
    this.claims = new EtcdVolumeClaims(conn, now);
    this.volumes = new EtcdClusterVolumes(conn, logger);
  }

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
    return { record: parse<ClusterJobRecord<S>>(JOBS + id, kv.value.toString(), this.logger), mod: kv.mod_revision };
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
        if (live && !old.stopped && old.type === type && JSON.stringify(old.spec) === JSON.stringify(spec)) return { record: old, unchanged: true };
        const record: ClusterJobRecord<S> = { id, type, version: live ? old.version + 1 : 0, stopped: false, submittedAt: now, groups, spec };
        const txn = mod === undefined ? this.conn.kv.if(JOBS + id, 'Create', '==', 0) : this.conn.kv.if(JOBS + id, 'Mod', '==', mod);
        const res = await txn.then(this.conn.kv.put(JOBS + id).value(JSON.stringify(record))).commit();
        if (res.succeeded) return { record, unchanged: false };
      }
      throw new ValidationError(`job "${id}" kept changing while it was submitted (others submitting it at once); try again`);
    });
  }

  /** Stops the job (its placements go at the next pass); a purge leaves a tombstone so every node purges its allocs. Undefined: no such job. */
  stop(id: string, purge: boolean, now: number): Promise<ClusterJobRecord<S> | undefined> {
    return this.call(`job "${id}"`, async () => {
      for (let attempt = 0; attempt < 8; attempt++) {
        const { record: old, mod } = await this.readJob(id);
        if (!old || old.purged || mod === undefined) return undefined;
        const record: ClusterJobRecord<S> = { ...old, stopped: true, submittedAt: now, ...(purge ? { purged: true } : {}) };
        const res = await this.conn.kv.if(JOBS + id, 'Mod', '==', mod).then(this.conn.kv.put(JOBS + id).value(JSON.stringify(record))).commit();
        if (res.succeeded) return record;
      }
      throw new ValidationError(`job "${id}" kept changing while it was stopped; try again`);
    });
  }

  /** Every job record, tombstones included. */
  async jobs(): Promise<ClusterJobRecord<S>[]> {
    const res = await this.call('jobs', () => this.conn.kv.getAll().prefix(JOBS).exec());
    return res.kvs.flatMap((kv) => parse<ClusterJobRecord<S>>(kv.key.toString(), kv.value.toString(), this.logger) ?? []);
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
      const pending = pendingText ? (parse<Unplaced[]>(PENDING + id, pendingText, this.logger) ?? []) : [];
      return { record, placements, pending };
    });
  }

  private async readPlacements(jobId?: string): Promise<Array<{ placement: Placement; mod: string }>> {
    const res = await this.conn.kv
      .getAll()
      .prefix(PLACEMENTS + (jobId ? `${jobId}/` : ''))
      .exec();
    return res.kvs.flatMap((kv: IKeyValue) => {
      const p = parse<Placement>(kv.key.toString(), kv.value.toString(), this.logger);
      return p ? [{ placement: p, mod: kv.mod_revision }] : [];
    });
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
  reconcile(options: ReconcileOptions): Promise<ReconcileResult> {
    return this.call('scheduling', () => this.pass(options));
  }

  private async pass(options: ReconcileOptions): Promise<ReconcileResult> {
    const { nodes, now, disconnectGraceMs } = options;
    // When each down node was first seen down; a node that is back loses its mark.
    const downRes = await this.conn.kv.getAll().prefix(DOWN).exec();
    const downSince: Record<string, number> = {};
    for (const kv of downRes.kvs) {
      const name = kv.key.toString().slice(DOWN.length);
      const v = parse<{ since: number }>(kv.key.toString(), kv.value.toString(), this.logger);
      if (v) downSince[name] = v.since;
    }
    for (const n of nodes) {
      if (n.status === 'down' && downSince[n.name] === undefined) {
        await this.conn.kv.if(DOWN + n.name, 'Create', '==', 0).then(this.conn.kv.put(DOWN + n.name).value(JSON.stringify({ since: now }))).commit();
        downSince[n.name] = (parse<{ since: number }>(DOWN + n.name, (await this.conn.kv.get(DOWN + n.name).string()) ?? '{}', this.logger)?.since ?? now);
      } else if (n.status === 'ready' && downSince[n.name] !== undefined) {
        await this.conn.kv.delete().key(DOWN + n.name);
        delete downSince[n.name];
      }
    }
    // A node down past its grace gives up its claims first (only while its lease is still gone), so its work can move.
    for (const n of nodes) {
      if (n.status !== 'down' || downSince[n.name] === undefined || now - downSince[n.name]! < disconnectGraceMs) continue;
      const released = await this.claims.releaseNode(n.name);
      if (released.length) options.onNodeReleased?.(n.name, released);
    }

    // The records and the revisions the commit compares, from one read: read apart, a job changed in between would be
    // planned from its old record and committed against its new revision.
    const jobKvs = (await this.conn.kv.getAll().prefix(JOBS).exec()).kvs;
    const records = jobKvs.flatMap((kv) => parse<ClusterJobRecord<S>>(kv.key.toString(), kv.value.toString(), this.logger) ?? []);
    const jobMods = new Map(jobKvs.map((kv) => [kv.key.toString().slice(JOBS.length), kv.mod_revision]));
    const read = await this.readPlacements();
    const volumes = await this.volumes.list();
    const claims: Record<string, ClusterClaim[]> = {};
    for (const { volumeId, claims: c } of await this.claims.all()) claims[volumeId] = c;
    const schedVolumes: Record<string, SchedVolume> = {};
    for (const v of volumes) schedVolumes[v.id] = { id: v.id, pluginId: v.pluginId, ...(v.accessibleTopology ? { accessibleTopology: v.accessibleTopology } : {}) };
    const jobs: SchedJob[] = records.map((r) => ({ id: r.id, type: r.type, version: r.version, stopped: r.stopped || !!r.purged, groups: r.groups }));
    const result = schedule({ jobs, placements: read.map((p) => p.placement), nodes, downSince, volumes: schedVolumes, claims, now, disconnectGraceMs });

    const modOf = new Map(read.map((p) => [`${p.placement.jobId}/${p.placement.slot}`, p.mod]));
    type Write = { jobId: string; key: string; mod: string | undefined; value?: string };
    const writes: Write[] = [
      ...result.remove.map((p) => ({ jobId: p.jobId, key: `${p.jobId}/${p.slot}`, mod: modOf.get(`${p.jobId}/${p.slot}`) })),
      ...result.put.map((p) => ({ jobId: p.jobId, key: `${p.jobId}/${p.slot}`, mod: modOf.get(`${p.jobId}/${p.slot}`), value: JSON.stringify(p) })),
    ];
    let conflicts = 0;
    for (let i = 0; i < writes.length; i += OPS_PER_TXN) {
      const chunk = writes.slice(i, i + OPS_PER_TXN);
      // Compare every revision the decision read: each slot's, and each job's (a job changed meanwhile is planned again).
      let txn = this.conn.kv.if(PLACEMENTS + chunk[0]!.key, chunk[0]!.mod === undefined ? 'Create' : 'Mod', '==', chunk[0]!.mod ?? 0);
      for (const w of chunk.slice(1)) txn = txn.and(PLACEMENTS + w.key, w.mod === undefined ? 'Create' : 'Mod', '==', w.mod ?? 0);
      for (const jobId of new Set(chunk.map((w) => w.jobId))) {
        const mod = jobMods.get(jobId);
        txn = mod === undefined ? txn.and(JOBS + jobId, 'Create', '==', 0) : txn.and(JOBS + jobId, 'Mod', '==', mod);
      }
      const ops = chunk.map((w) => (w.value === undefined ? this.conn.kv.delete().key(PLACEMENTS + w.key) : this.conn.kv.put(PLACEMENTS + w.key).value(w.value)));
      const res = await txn.then(...ops).commit();
      if (!res.succeeded) conflicts++;
    }
    // What could not be placed, per job, for `job status`; written only when it changed.
    const pendingByJob = new Map<string, Unplaced[]>();
    for (const u of result.unplaced) pendingByJob.set(u.jobId, [...(pendingByJob.get(u.jobId) ?? []), u]);
    const pendingNow = await this.conn.kv.getAll().prefix(PENDING).strings();
    for (const r of records) {
      const text = pendingByJob.has(r.id) ? JSON.stringify(pendingByJob.get(r.id)) : undefined;
      const before = pendingNow[PENDING + r.id];
      if (text === before) continue;
      if (text === undefined) await this.conn.kv.delete().key(PENDING + r.id);
      else await this.conn.kv.put(PENDING + r.id).value(text);
    }
    // A purged job's tombstone goes a day after the purge, once it has no placement left (a node away that long finds no record of
    // the job, and its agent warns of the allocs it still holds rather than guessing).
    for (const r of records) {
      if (r.purged && now - r.submittedAt > TOMBSTONE_MS && !read.some((p) => p.placement.jobId === r.id) && !result.put.some((p) => p.jobId === r.id)) {
        const mod = jobMods.get(r.id);
        if (mod !== undefined) await this.conn.kv.if(JOBS + r.id, 'Mod', '==', mod).then(this.conn.kv.delete().key(JOBS + r.id)).commit();
      }
    }
    return { ...result, conflicts };
  }
}
