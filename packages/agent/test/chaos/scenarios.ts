// The fault suite's scenarios, shared by the CI tests in this folder (small
// counts) and bench/chaos/run.js (the full counts and the one table). Each
// scenario runs rounds; a round starts its own agent on its own temp dir,
// does its damage, stops everything, counts what is left (leaks.ts) and
// cleans up completely even when it fails. A round "survived" when every
// check of its scenario held; its leaks are counted apart.
//
//   crash points      the agent SIGKILLs itself at each named step (CRASH_POINTS
//                     in @csiplug/core) of job run / job stop / a plugin update /
//                     the remount of a stale mount / volume create, expand and
//                     delete; a fresh agent takes over; everything is stopped
//   random kill -9    kill -9 at a random moment of job run, job stop, volume
//                     create, volume delete, plugin update
//   plugin faults     a faulty plugin (no socket, not gRPC, crash at start, hang,
//                     garbage, crash on an RPC, crash after N calls, slower than
//                     csi_call) during prerun, restore and postrun: the agent
//                     answers its health within a second, the events say why
//   storage faults    the data dir on a full tmpfs; a disk full of a task's logs and
//                     the agent's (full-logs-scenario.ts); a corrupt or empty state file
//   plugin away       kill -9, the plugin kept away for 2–5 × plugin_wait_restore,
//                     agent back: no workload stopped, no mount lost, files intact
import { CRASH_POINTS, type CrashPointName, SeededRandom } from '@csiplug/core';
import { createHash } from 'crypto';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import type { AllocView } from '@csiplug/api';
import { ApiClient } from '@csiplug/api';
import { containersUnder, isAlive, mountsUnder, pollUntil } from '../support/agent-process';
import { fillUp } from '../support/disk';
import {
  ChaosAgent,
  type ChaosAgentOptions,
  PLUGIN_ID,
  type PluginFaults,
  RESTORE_LIMIT_MS,
  describeEvents,
  sleep,
  workloadUp,
} from './chaos-agent';
import { type LeakCounts, addLeaks, formatLeaks, noLeaks, processesUnder, totalLeaks } from './leaks';
import { fullLogsDiskScenario } from './full-logs-scenario';

export interface RoundOutcome {
  /** What the round did (the crash point, the fault and phase…). */
  label: string;
  survived: boolean;
  leaks: LeakCounts;
  /** Why it did not survive, and what leaked. */
  problems: string[];
}

export interface Scenario {
  /** The table's row name. */
  name: string;
  /** Rounds in CI (the jest tests) and in the full run (bench/chaos). */
  rounds: { ci: number; full: number };
  /** What round `i` does, without doing it (to pick rounds by it). */
  labelOf(i: number): string;
  /** Round `i` (0-based; scenarios cycle through their cases by it). */
  round(i: number): Promise<RoundOutcome>;
}

export interface ScenarioResult {
  name: string;
  rounds: number;
  survived: number;
  leaks: LeakCounts;
  failures: RoundOutcome[];
}

/** Runs rounds 0..n-1 of a scenario (or the rounds `indices` names), `concurrency` at a time (each round has its own agent). */
export async function runScenario(
  s: Scenario,
  rounds: number,
  options: { concurrency?: number; log?: (line: string) => void; indices?: readonly number[] } = {},
): Promise<ScenarioResult> {
  const indices = options.indices ?? Array.from({ length: rounds }, (_, i) => i);
  const result: ScenarioResult = { name: s.name, rounds: indices.length, survived: 0, leaks: noLeaks(), failures: [] };
  let next = 0;
  const worker = async () => {
    while (next < indices.length) {
      const i = indices[next++]!;
      const t0 = Date.now();
      let outcome: RoundOutcome;
      try {
        outcome = await s.round(i);
      } catch (err) {
        outcome = {
          label: `round ${i}`,
          survived: false,
          leaks: noLeaks(),
          problems: [`the round itself failed: ${(err as Error).stack ?? String(err)}`],
        };
      }
      if (outcome.survived) result.survived++;
      addLeaks(result.leaks, outcome.leaks);
      if (!outcome.survived || totalLeaks(outcome.leaks) > 0) result.failures.push(outcome);
      const status = outcome.survived ? 'survived' : 'FAILED';
      options.log?.(
        `${s.name} #${i} ${outcome.label}: ${status}, leaks ${formatLeaks(outcome.leaks)} (${((Date.now() - t0) / 1000).toFixed(1)} s)${outcome.problems.length ? `\n    ${outcome.problems.join('\n    ')}` : ''}`,
      );
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency ?? 1, indices.length)) }, worker));
  return result;
}

/** The one table: scenario, rounds, survived, leaks. */
export function formatTable(results: readonly ScenarioResult[]): string {
  const rows = [
    ['scenario', 'rounds', 'survived', 'leaks'],
    ...results.map((r) => [r.name, String(r.rounds), String(r.survived), formatLeaks(r.leaks)]),
  ];
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) =>
    `| ${r.map((cell, c) => (c === 0 || c === 3 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join(' | ')} |`;
  return [
    line(rows[0]!),
    `|${widths.map((w, c) => (c === 0 || c === 3 ? '-'.repeat(w + 2) : `${'-'.repeat(w + 1)}:`)).join('|')}|`,
    ...rows.slice(1).map(line),
  ].join('\n');
}

/** Problems of a result, one per line, for a test's failure message. */
export function describeFailures(r: ScenarioResult): string {
  return r.failures
    .map((f) => `${f.label}: ${f.survived ? 'survived' : 'FAILED'}, leaks ${formatLeaks(f.leaks)}\n  ${f.problems.join('\n  ')}`)
    .join('\n');
}

// ---- round plumbing -------------------------------------------------------------

/** plugin_wait_restore where the plugin is not kept away on purpose: a re-registration slowed by a busy machine must not fail a restore. */
const PATIENT_RESTORE_MS = 30_000;

/** One round: its own agent, its problems, and — whatever happens — the leak count and a complete cleanup. */
async function withAgent(
  label: string,
  options: ChaosAgentOptions,
  body: (a: ChaosAgent, problems: string[]) => Promise<void>,
  prepare?: (a: ChaosAgent) => void,
): Promise<RoundOutcome> {
  const a = new ChaosAgent(options);
  const problems: string[] = [];
  let leaks = noLeaks();
  try {
    prepare?.(a);
    await body(a, problems);
    if (a.running) {
      const late = await a.stopAll();
      for (const l of late) problems.push(`stopping everything: ${l}`);
    }
    const report = await a.countLeaks();
    leaks = report.leaks;
    problems.push(...report.details);
  } catch (err) {
    problems.push((err as Error).message);
    if (!a.running) {
      // Still count what a round that broke off left, before the cleanup takes it.
      const report = await a.countLeaks(0).catch(() => undefined);
      if (report) {
        leaks = report.leaks;
        problems.push(...report.details);
      }
    }
  } finally {
    if (problems.length && a.log) problems.push(`agent log (tail): ${a.log.split('\n').slice(-15).join('\n      ')}`);
    await a.destroy();
  }
  const survived = !problems.some((p) => !isLeakDetail(p) && !p.startsWith('agent log'));
  return { label, survived, leaks, problems };
}

const LEAK_DETAIL =
  /^(mount |process |volume \S+: claim|alloc \S+ \(\S+\) still|controller attachment|record |unreadable record|claim of|controller publish|volume mismatch)/;
function isLeakDetail(p: string): boolean {
  return LEAK_DETAIL.test(p);
}

/** A promise that never rejects (so one left pending while the agent dies is never an unhandled rejection), with what it ended with. */
function settle<T>(p: Promise<T>): Promise<{ value?: T; error?: Error }> {
  return p.then(
    (value) => ({ value }),
    (error: Error) => ({ error }),
  );
}

/** Records `message` as a problem of the round unless `cond` holds. */
function check(cond: boolean, problems: string[], message: string): boolean {
  if (!cond) problems.push(message);
  return cond;
}

// ---- 1. crash points ------------------------------------------------------------

type CrashAction = 'run' | 'stop' | 'update' | 'remount' | VolumeOpAction;
type VolumeOpAction = 'create' | 'expand' | 'delete';
const VOLUME_OP_ACTIONS: readonly CrashAction[] = ['create', 'expand', 'delete'];
const isVolumeOp = (action: CrashAction): action is VolumeOpAction => VOLUME_OP_ACTIONS.includes(action);

/** Which action reaches each crash point. */
export const CRASH_POINT_ACTIONS: Readonly<Record<CrashPointName, CrashAction>> = Object.freeze(
  Object.fromEntries(
    (Object.keys(CRASH_POINTS) as CrashPointName[]).map((p) => {
      if (p === 'agent.plugin-update.after-new-healthy') return [p, 'update'];
      if (p.startsWith('reconciler.remount.')) return [p, 'remount'];
      const op = /^catalog\.(create|expand|delete)\./.exec(p)?.[1];
      if (op) return [p, op];
      if (/^reconciler\.(want|claim|stage|publish)\.|^catalog\.claim\.|^agent\.run-job\./.test(p)) return [p, 'run'];
      return [p, 'stop'];
    }),
  ) as Record<CrashPointName, CrashAction>,
);

export interface CrashCase {
  point: CrashPointName;
  /** The n-th time the point is reached. */
  count: number;
  action: CrashAction;
  workloads: number;
  controllerPublish: boolean;
}

/**
 * Round i's case: every point in turn; then again with controller publish,
 * with two workloads (the second mount or unmount dies), and both — four
 * variants, 4 × the number of points in all.
 */
export function crashCase(i: number): CrashCase {
  const points = Object.keys(CRASH_POINTS) as CrashPointName[];
  const point = points[i % points.length]!;
  const variant = Math.floor(i / points.length) % 4;
  const action = CRASH_POINT_ACTIONS[point];
  // A volume operation runs with one workload on another volume, or two (variants 2, 3): they keep running through the crash.
  const workloads = variant >= 2 ? 2 : 1;
  const controllerPublish = variant % 2 === 1 || point.startsWith('catalog.');
  // job run's save point is first reached by the plugin job's run.
  const base = point === 'agent.run-job.after-save' ? 2 : 1;
  // A volume operation's round creates its workloads' volumes first: the create it aims at is the next one.
  const count =
    action === 'update' || action === 'expand' || action === 'delete' ? 1 : action === 'create' ? workloads + 1 : base + (workloads - 1);
  return { point, count, action, workloads, controllerPublish };
}

export const CRASH_POINT_COUNT = Object.keys(CRASH_POINTS).length;

function crashLabel(c: CrashCase): string {
  return `${c.point}:${c.count} (${c.action}, ${c.workloads} workload(s)${c.controllerPublish ? ', controller publish' : ''})`;
}

export const crashPointScenario: Scenario = {
  name: 'crash points',
  rounds: { ci: CRASH_POINT_COUNT, full: 4 * CRASH_POINT_COUNT },
  labelOf: (i) => crashLabel(crashCase(i)),
  round: (i) => {
    const c = crashCase(i);
    const label = crashLabel(c);
    return withAgent(label, { restoreLimitMs: PATIENT_RESTORE_MS }, async (a, problems) => {
      a.env = { CSIPLUG_CRASH_AT: `${c.point}:${c.count}` };
      await a.start();
      await a.runPlugin({ controllerPublish: c.controllerPublish });
      const action = c.action;
      if (isVolumeOp(action)) return volumeOpRound(a, c, action, problems);
      const names = Array.from({ length: c.workloads }, (_, k) => String(k));
      for (const n of names) await a.createVolume(`vol-${n}`);
      let fired: Promise<{ error?: Error }>;
      let before: AllocView[] = [];
      const pids = new Map<string, number>();
      if (action === 'run') {
        fired = settle(Promise.all(names.map((n) => a.runWorkload(n, `vol-${n}`))));
      } else {
        const ids = await Promise.all(names.map((n) => a.runWorkload(n, `vol-${n}`)));
        before = await a.waitWorkloadsUp(ids);
        for (const id of ids) pids.set(id, a.taskPid(id, 'writer'));
        const act = {
          stop: () => Promise.all(names.map((n) => a.api.stopJob(`work-${n}`))),
          update: () => a.runPlugin({ controllerPublish: c.controllerPublish, version: 2 }, false),
          // The mounts go stale (gone from under the workloads), then the plugin restarts: its check remounts them.
          remount: async () => {
            for (const b of before) makeStale(a, b);
            a.killPlugin();
          },
        }[action];
        fired = settle<unknown>(act());
      }
      const exit = await a.waitExit(30_000);
      await fired;
      if (!exit) {
        problems.push(`the agent did not die at ${c.point}:${c.count} within 30 s (the point was not reached)`);
        await a.kill('SIGKILL');
      } else if (exit.signal !== 'SIGKILL' || !a.log.includes(`crash point ${c.point} reached`)) {
        problems.push(`the agent exited (${exit.signal ?? exit.code}) but not at crash point ${c.point}`);
      }
      // A fresh agent takes over.
      a.env = { CSIPLUG_CRASH_AT: undefined };
      await a.start();
      await a.waitPluginHealthy().catch((err: Error) => problems.push(`after the restart: ${err.message}`));
      if (c.action === 'stop') {
        // The stops were asked for: the allocs end, their tasks do not come back.
        for (const b of before) {
          const after = await pollUntil(
            `alloc ${b.name} terminal after the restart`,
            async () => {
              const x = await a.api.getAlloc(b.id);
              return x.clientStatus === 'complete' || x.clientStatus === 'failed' ? x : undefined;
            },
            30_000,
          ).catch((err: Error) => (problems.push(err.message), undefined));
          if (after)
            check(!isAlive(a.taskPid(b.id, 'writer')), problems, `alloc ${b.name}: its task is alive although the job was stopped`);
        }
      } else {
        // The workloads whose job was taken run with their volume; for an update, the very same tasks.
        const allocs = (await a.api.listAllocs()).filter((x) => x.jobId.startsWith('work-'));
        if (c.action !== 'run')
          check(allocs.length === c.workloads, problems, `after the restart ${allocs.length} of ${c.workloads} workload allocs are known`);
        const up = await a
          .waitWorkloadsUp(allocs.map((x) => x.id))
          .catch((err: Error) => (problems.push(`after the restart: ${err.message}`), undefined));
        for (const b of before) {
          const now = up?.find((x) => x.id === b.id);
          if (!now) continue;
          if (a.isolated && c.action === 'remount') {
            // Isolated, its bind of the old mount is private: it is restarted to see the new one (unless the remount finished
            // before the crash and its word was lost with the agent — then the bind it kept is the hostpath's own dir, which lives on).
            await pollUntil(
              `alloc ${b.name} running again after a restart for its remount, if one was asked`,
              async () => {
                const x = await a.api.getAlloc(b.id);
                if (!x.tasks['writer']!.events.some((e) => /was remounted; an isolated task/.test(e.message))) return true;
                let pid: number | undefined;
                try {
                  pid = a.taskPid(b.id, 'writer');
                } catch {
                  return undefined; // between its runs
                }
                return workloadUp(x) && pid !== pids.get(b.id) && isAlive(pid) ? true : undefined;
              },
              20_000,
            ).catch((err: Error) => problems.push(err.message));
          } else {
            check(
              now.tasks['writer']!.restarts === 0 && a.taskPid(b.id, 'writer') === pids.get(b.id),
              problems,
              `alloc ${b.name} was restarted (${c.action})`,
            );
          }
          const ownerFile = path.join(now.volumes['data']!.hostPath, 'owner.txt');
          const owner = (): string => (fs.existsSync(ownerFile) ? fs.readFileSync(ownerFile, 'utf8').trim() : '(no owner.txt)');
          if (a.isolated && c.action === 'remount') {
            // A task restarted for its remount writes its own id again (`echo > owner.txt` truncates first): a read in that
            // moment sees an empty file. Another alloc's id, or nothing for good, is what would be wrong.
            await pollUntil(`alloc ${b.name}: owner.txt holding its id`, async () => (owner() === b.id ? true : undefined), 10_000).catch(
              () => undefined,
            );
          }
          const read = owner();
          check(read === b.id, problems, `alloc ${b.name}: owner.txt changed (it holds "${read}")`);
        }
      }
    });
  },
};

/** The target volume of a crash in a volume operation, and the size an expand grows it to (created at volumeHcl's 10 MiB). */
const OP_VOLUME = 'vol-op';
const EXPANDED_BYTES = 50 * 1024 * 1024;

/**
 * A crash point in a volume create, expand or delete: the agent dies there
 * while workloads on other volumes run; the next agent settles the
 * operation — the volume created and recorded, grown and recorded, or
 * deleted on both sides — and says so in its log; the workloads keep
 * running, untouched. The leak count then compares the catalog with the
 * plugin's own volumes (leaks.ts, volumeMismatches).
 */
async function volumeOpRound(a: ChaosAgent, c: CrashCase, op: VolumeOpAction, problems: string[]): Promise<void> {
  const names = Array.from({ length: c.workloads }, (_, k) => String(k));
  for (const n of names) await a.createVolume(`vol-${n}`);
  const ids = await Promise.all(names.map((n) => a.runWorkload(n, `vol-${n}`)));
  const before = await a.waitWorkloadsUp(ids);
  const pids = new Map(ids.map((id) => [id, a.taskPid(id, 'writer')]));
  if (op !== 'create') await a.createVolume(OP_VOLUME);
  const fired = settle<unknown>(
    {
      create: () => a.createVolume(OP_VOLUME),
      expand: () => a.expandVolume(OP_VOLUME, '50MiB'),
      delete: () => a.api.deleteVolume(OP_VOLUME),
    }[op](),
  );
  const exit = await a.waitExit(30_000);
  await fired;
  if (!exit) {
    problems.push(`the agent did not die at ${c.point}:${c.count} within 30 s (the point was not reached)`);
    await a.kill('SIGKILL');
  } else if (exit.signal !== 'SIGKILL' || !a.log.includes(`crash point ${c.point} reached`)) {
    problems.push(`the agent exited (${exit.signal ?? exit.code}) but not at crash point ${c.point}`);
  }
  a.env = { CSIPLUG_CRASH_AT: undefined };
  const logFrom = a.log.length;
  await a.start();
  await a.waitPluginHealthy().catch((err: Error) => problems.push(`after the restart: ${err.message}`));
  const settledOp = await pollUntil(
    `the ${op} of ${OP_VOLUME} cut short by the crash settled by the next agent`,
    async () => {
      const v = (await a.api.listVolumes()).find((x) => x.id === OP_VOLUME);
      const done = { create: v !== undefined, expand: v?.capacityBytes === EXPANDED_BYTES, delete: v === undefined }[op];
      return done ? true : undefined;
    },
    30_000,
  ).catch((err: Error) => (problems.push(`after the restart: ${err.message}`), undefined));
  if (settledOp) {
    const said = a.log.slice(logFrom);
    check(
      new RegExp(`finished a volume ${op}|volume ${op} cut short by an agent restart or a lost answer was recorded already`).test(said),
      problems,
      `the next agent settled the ${op} of ${OP_VOLUME} without a word in its log: ${said.slice(-600)}`,
    );
  }
  for (const b of before) {
    const now = await a.api.getAlloc(b.id);
    check(
      workloadUp(now) && now.tasks['writer']!.restarts === 0 && a.taskPid(b.id, 'writer') === pids.get(b.id),
      problems,
      `workload ${b.name} did not keep running through the crash in a volume ${op}: ${describeEvents(now)}`,
    );
  }
}

/**
 * Takes an alloc's volume mounts away from under it — its target and the
 * staging mount behind it — as a dead FUSE or network mount would leave
 * them: no longer mount points. The plugin's next check finds them stale.
 */
function makeStale(a: ChaosAgent, alloc: AllocView): void {
  const v = alloc.volumes['data']!;
  const staging = mountsUnder(path.join(a.dataDir, 'csi')).filter((m) => m.includes(`/staging/${v.volumeId}/`));
  for (const m of [v.hostPath, ...staging]) execFileSync('umount', ['-l', m]);
}

// ---- 1b. random kill -9 ---------------------------------------------------------

type KillMoment = 'job run' | 'job stop' | 'volume create' | 'volume delete' | 'plugin update';
const KILL_MOMENTS: readonly KillMoment[] = ['job run', 'job stop', 'volume create', 'volume delete', 'plugin update'];
/** How long after the request the kill may come (ms): about as long as each takes here. */
const KILL_WINDOW_MS: Readonly<Record<KillMoment, number>> = {
  'job run': 400,
  'job stop': 400,
  'volume create': 150,
  'volume delete': 150,
  'plugin update': 2_500,
};

function killMoment(i: number): { moment: KillMoment; delay: number; label: string } {
  const moment = KILL_MOMENTS[i % KILL_MOMENTS.length]!;
  const delay = Math.floor(new SeededRandom(1000 + i).next() * KILL_WINDOW_MS[moment]);
  return { moment, delay, label: `${moment}, kill -9 after ${delay} ms` };
}

export const randomKillScenario: Scenario = {
  name: 'random kill -9',
  rounds: { ci: 5, full: 50 },
  labelOf: (i) => killMoment(i).label,
  round: (i) => {
    const { moment, delay, label } = killMoment(i);
    return withAgent(label, { restoreLimitMs: PATIENT_RESTORE_MS }, async (a, problems) => {
      await a.start();
      await a.runPlugin({ controllerPublish: i % 2 === 1 });
      await a.createVolume('vol-0');
      let ids: string[] = [];
      if (moment !== 'job run') {
        ids = [await a.runWorkload('0', 'vol-0')];
        await a.waitWorkloadsUp(ids);
      }
      if (moment === 'volume delete') await a.createVolume('vol-del');
      const fired = settle<unknown>(
        {
          'job run': () => a.runWorkload('0', 'vol-0'),
          'job stop': () => a.api.stopJob('work-0'),
          'volume create': () => a.createVolume('vol-new'),
          'volume delete': () => a.api.deleteVolume('vol-del'),
          'plugin update': () => a.runPlugin({ controllerPublish: i % 2 === 1, version: 2 }, false),
        }[moment](),
      );
      await sleep(delay);
      await a.kill('SIGKILL');
      await fired;
      await a.start();
      await a.waitPluginHealthy().catch((err: Error) => problems.push(`after the restart: ${err.message}`));
      // Whatever was taken settles: a running workload stays up, a stopped one ends.
      const work = (await a.api.listAllocs()).filter((x) => x.jobId.startsWith('work-'));
      for (const w of work) {
        const settled = await pollUntil(
          `alloc ${w.name} settled after the restart`,
          async () => {
            const x = await a.api.getAlloc(w.id);
            if (x.desiredStatus === 'stop') return x.clientStatus === 'complete' || x.clientStatus === 'failed' ? x : undefined;
            if (x.clientStatus === 'failed' || x.clientStatus === 'complete') return x;
            return workloadUp(x) ? x : undefined;
          },
          30_000,
        ).catch((err: Error) => (problems.push(err.message), undefined));
        if (settled && settled.desiredStatus === 'run')
          check(settled.clientStatus === 'running', problems, `alloc ${settled.name} ended after the restart: ${describeEvents(settled)}`);
      }
      // Stop everything, deleting every volume the catalog has before the plugin goes.
      const deleteVolumes = async () => {
        for (const v of await a.api.listVolumes())
          await a.api.deleteVolume(v.id).catch((err: Error) => problems.push(`deleting volume ${v.id} after the restart: ${err.message}`));
      };
      for (const l of await a.stopAll(30_000, deleteVolumes)) problems.push(`stopping everything: ${l}`);
    });
  },
};

// ---- 2. plugin faults × phases --------------------------------------------------

type Phase = 'prerun' | 'restore' | 'postrun';

export interface FaultCase {
  phase: Phase;
  label: string;
  faults: PluginFaults;
  /** A start fault: the plugin is killed so that its restart starts with it (and again once it is lifted). */
  atStart: boolean;
}

/** Longer than csi_call (3 s) and the probe limit (5 s): every slow call misses its deadline. */
const SLOW_MS = 6_000;
/** The RPCs each phase depends on. */
const PHASE_RPCS: Readonly<Record<Phase, readonly string[]>> = {
  prerun: [
    'Probe',
    'GetPluginInfo',
    'NodeGetInfo',
    'NodeGetCapabilities',
    'NodeStageVolume',
    'NodePublishVolume',
    'ControllerPublishVolume',
  ],
  restore: ['Probe', 'GetPluginInfo', 'NodeGetInfo', 'NodeGetCapabilities', 'NodeGetVolumeStats'],
  postrun: ['NodeUnpublishVolume', 'NodeUnstageVolume', 'ControllerUnpublishVolume'],
};

/** Every fault × phase case, in the order of the full run. */
export function faultCases(): FaultCase[] {
  const cases: FaultCase[] = [];
  for (const phase of ['prerun', 'restore', 'postrun'] as const) {
    for (const start of ['no-socket', 'not-grpc', 'crash'] as const)
      cases.push({
        phase,
        label: `${phase}: ${start === 'crash' ? 'crash at start' : start}`,
        faults: { startFault: start },
        atStart: true,
      });
    for (const rpc of PHASE_RPCS[phase]) {
      cases.push({ phase, label: `${phase}: hang ${rpc}`, faults: { hangRpcs: [rpc] }, atStart: false });
      cases.push({ phase, label: `${phase}: garbage from ${rpc}`, faults: { garbageRpcs: [rpc] }, atStart: false });
      cases.push({ phase, label: `${phase}: ${rpc} slower than csi_call`, faults: { slowRpcs: [rpc], slowMs: SLOW_MS }, atStart: false });
      cases.push({ phase, label: `${phase}: crash on ${rpc}`, faults: { crashOnRpcs: [rpc] }, atStart: false });
    }
    cases.push({ phase, label: `${phase}: crash after 3 calls`, faults: { crashAfter: 3 }, atStart: false });
  }
  return cases;
}

/** The few cases CI runs: one of each kind, across the phases (the issue's crash during NodePublishVolume among them). */
export const CI_FAULT_CASES: readonly string[] = [
  'prerun: no-socket',
  'prerun: crash on NodePublishVolume',
  'restore: not-grpc',
  'restore: garbage from NodeGetInfo',
  'postrun: hang NodeUnpublishVolume',
  'postrun: crash at start',
];

async function applyFault(a: ChaosAgent, c: FaultCase): Promise<void> {
  a.setPluginFaults(c.faults);
  if (c.atStart) a.killPlugin();
}

/** Lifts the fault; a plugin started with a start fault is killed so that its next start is healthy. */
async function liftFault(a: ChaosAgent, c: FaultCase): Promise<void> {
  a.setPluginFaults(undefined);
  if (c.atStart || c.faults.crashAfter || c.faults.crashOnRpcs) {
    const killed = a.killPlugin();
    // Restarted (a new process) before anyone asks whether the plugin is healthy: until the agent has seen the
    // kill it may still count the killed process healthy, and a job stopped then finds its plugin gone.
    await pollUntil(
      'the plugin restarted once the fault was lifted',
      () => {
        const now = a.pluginPids();
        return now.length >= Math.max(1, killed.length) && now.every((pid) => !killed.includes(pid)) ? true : undefined;
      },
      30_000,
    );
  }
}

export function pluginFaultScenario(cases: readonly FaultCase[], name = 'plugin faults'): Scenario {
  return {
    name,
    rounds: { ci: cases.length, full: cases.length },
    labelOf: (i) => cases[i % cases.length]!.label,
    round: (i) => {
      const c = cases[i % cases.length]!;
      const controllerPublish =
        c.faults.hangRpcs?.[0]?.startsWith('Controller') ||
        c.faults.garbageRpcs?.[0]?.startsWith('Controller') ||
        c.faults.slowRpcs?.[0]?.startsWith('Controller') ||
        c.faults.crashOnRpcs?.[0]?.startsWith('Controller') ||
        false;
      return withAgent(c.label, {}, async (a, problems) => {
        await a.start();
        await a.runPlugin({ controllerPublish });
        await a.createVolume('vol-0');
        // What an event must say to explain the fault: the volume or plugin, and what went wrong.
        const faultWords = [
          ...(c.faults.hangRpcs ?? []),
          ...(c.faults.garbageRpcs ?? []),
          ...(c.faults.slowRpcs ?? []),
          ...(c.faults.crashOnRpcs ?? []),
        ];
        const says = (what: RegExp) => (m: string) =>
          (m.includes('vol-0') || m.includes(PLUGIN_ID)) && (what.test(m) || faultWords.some((w) => m.includes(w)));
        const failureWords =
          /fail|timed out|time out|deadline|unavailable|not available|internal|not reachable|crash|away|unhealthy|error|refused|retry|waiting/i;
        const pendingWords = /unmount|unpublish|unstage|pending|retr|fail|timed out|away|unhealthy/i;
        if (c.phase === 'prerun') {
          await applyFault(a, c);
          const since = Date.now();
          const id = await a.runWorkload('0', 'vol-0');
          // Long enough for the plugin wait (6 s) to run out and for two calls to miss csi_call (3 s).
          const windowMs = 14_000;
          const settled = settle(
            pollUntil(
              'the workload to run or fail',
              async () => {
                const x = await a.api.getAlloc(id);
                return x.clientStatus === 'running' || x.clientStatus === 'failed' ? x : undefined;
              },
              windowMs,
              200,
            ),
          );
          const watch = await a.watchHealth(windowMs, { until: settled });
          check(
            watch.late.length === 0,
            problems,
            `health answered late or not at all during the fault: ${watch.late.slice(0, 3).join('; ')}`,
          );
          await settled;
          // Running is fine; failed, or still waiting (a claim retried), must say why in its task events (alloc status).
          const alloc = await a.api.getAlloc(id);
          if (alloc.clientStatus !== 'running') {
            check(
              !!a.explains(alloc, since, says(failureWords), 'task events'),
              problems,
              `the alloc is ${alloc.clientStatus} and no task event says why: task events: ${describeEvents(alloc)}; streamed: ${a.streamedFor(id, since)}`,
            );
          }
          await liftFault(a, c);
          await a.waitPluginHealthy().catch((err: Error) => problems.push(`after the fault was lifted: ${err.message}`));
          if (alloc.clientStatus === 'pending') {
            // What waited goes on once the plugin is fine.
            await pollUntil(
              'the waiting workload to run or fail once the fault is lifted',
              async () => {
                const x = await a.api.getAlloc(id);
                return x.clientStatus === 'running' || x.clientStatus === 'failed' ? x : undefined;
              },
              20_000,
            ).catch((err: Error) => problems.push(err.message));
          }
          return;
        }
        const id = await a.runWorkload('0', 'vol-0');
        const [before] = await a.waitWorkloadsUp([id]);
        const pid = a.taskPid(id, 'writer');
        const hostPath = before!.volumes['data']!.hostPath;
        if (c.phase === 'restore') {
          await a.kill('SIGKILL');
          await applyFault(a, c);
          const since = Date.now();
          await a.start();
          const watch = await a.watchHealth(3 * RESTORE_LIMIT_MS + 2_000);
          check(
            watch.late.length === 0,
            problems,
            `health answered late or not at all during the fault: ${watch.late.slice(0, 3).join('; ')}`,
          );
          const alloc = await a.api.getAlloc(id);
          check(
            isAlive(pid) && alloc.clientStatus === 'running',
            problems,
            `the live workload was stopped while the plugin was faulty: ${alloc.clientStatus}; ${describeEvents(alloc)}`,
          );
          check(mountsUnder(hostPath).includes(hostPath), problems, 'the live mount was taken down while the plugin was faulty');
          // "Marked plugin away with a task event": what a restore says must outlast the boot it happened in.
          check(
            !!a.explains(alloc, since, says(failureWords), 'task events'),
            problems,
            `no task event of the alloc says the plugin is faulty or away: task events: ${describeEvents(alloc)}; streamed: ${a.streamedFor(id, since)}`,
          );
          await liftFault(a, c);
          await a.waitPluginHealthy().catch((err: Error) => problems.push(`after the fault was lifted: ${err.message}`));
          const back = await a
            .waitWorkloadsUp([id])
            .catch((err: Error) => (problems.push(`after the fault was lifted: ${err.message}`), undefined));
          if (back)
            check(
              a.taskPid(id, 'writer') === pid && fs.readFileSync(path.join(hostPath, 'owner.txt'), 'utf8').trim() === id,
              problems,
              'the workload was restarted or its file changed',
            );
          return;
        }
        // postrun
        await applyFault(a, c);
        const since = Date.now();
        const stopping = settle(new ApiClient({ address: a.api.address, timeoutMs: 60_000 }).stopJob('work-0'));
        const watch = await a.watchHealth(2 * 3_000 + 2_000);
        check(
          watch.late.length === 0,
          problems,
          `health answered late or not at all during the fault: ${watch.late.slice(0, 3).join('; ')}`,
        );
        check(!isAlive(pid), problems, 'the workload task still runs after its job was stopped');
        const unmounted = !mountsUnder(hostPath).includes(hostPath);
        if (!unmounted) {
          // The unmount waits for the plugin: that must show, in an event or in `volume status`.
          const alloc = await a.api.getAlloc(id);
          const volume = (await a.api.getVolume('vol-0')) as {
            mounts?: { allocId: string; pendingUnmount?: boolean; lastError?: string }[];
          };
          const shown = volume.mounts?.find((m) => m.allocId === id && m.pendingUnmount);
          check(
            !!a.explains(alloc, since, says(pendingWords)) || !!shown,
            problems,
            `the unmount is pending and neither an event nor volume status says so: task events: ${describeEvents(alloc)}; streamed: ${a.streamedFor(id, since)}; volume status mounts: ${JSON.stringify(volume.mounts ?? null)}`,
          );
        }
        await liftFault(a, c);
        await a.waitPluginHealthy().catch((err: Error) => problems.push(`after the fault was lifted: ${err.message}`));
        const stopped = await stopping;
        if (stopped.error) problems.push(`job stop: ${stopped.error.message}`);
        // The pending unmount finishes by itself once the plugin is back.
        await pollUntil(
          'the pending unmount to finish once the plugin is back',
          async () => {
            const v = await a.api.getVolume('vol-0');
            return !a.volumeMounts().length && v.claims.length === 0 ? true : undefined;
          },
          20_000,
        ).catch((err: Error) => problems.push(err.message));
      });
    },
  };
}

export const pluginFaultScenarioFull = pluginFaultScenario(faultCases());
export const pluginFaultScenarioCi = pluginFaultScenario(
  CI_FAULT_CASES.map((label) => {
    const c = faultCases().find((x) => x.label === label);
    if (!c) throw new Error(`CI_FAULT_CASES: no fault case is labelled "${label}"`);
    return c;
  }),
);

// ---- 3. storage faults ------------------------------------------------------------

/** The data dir on a small tmpfs that is filled up: writes are refused with a clear error, nothing half-applied, normal service when space returns. */
export const fullDiskScenario: Scenario = {
  name: 'storage: full data dir',
  rounds: { ci: 1, full: 5 },
  labelOf: (i) => `tmpfs data dir filled (round ${i})`,
  round: (i) =>
    withAgent(
      `tmpfs data dir filled (round ${i})`,
      { restoreLimitMs: PATIENT_RESTORE_MS },
      async (a, problems) => {
        await a.start();
        await a.runPlugin();
        await a.createVolume('vol-0');
        await a.createVolume('vol-1');
        const first = await a.runWorkload('0', 'vol-0');
        const [up] = await a.waitWorkloadsUp([first]);
        const filler = path.join(a.dataDir, 'filler');
        fillUp(filler);
        try {
          const jobsBefore = (await a.api.listJobs()).map((j) => j.id).sort();
          const refused = await a.runWorkload('1', 'vol-1').then(
            () => undefined,
            (err: Error & { status?: number }) => err,
          );
          if (check(!!refused, problems, 'job run answered OK on a full data dir')) {
            check(
              /space|ENOSPC|full|SQLITE_FULL/i.test(refused!.message),
              problems,
              `the refusal does not say the disk is full: ${refused!.message}`,
            );
          }
          check(
            JSON.stringify((await a.api.listJobs()).map((j) => j.id).sort()) === JSON.stringify(jobsBefore),
            problems,
            'the refused job was half applied: it is listed',
          );
          check(!(await a.api.listAllocs()).some((x) => x.jobId === 'work-1'), problems, 'the refused job was half applied: it has allocs');
          check((await a.api.getVolume('vol-1')).claims.length === 0, problems, 'the refused job was half applied: its volume is claimed');
          const volumeRefused = await a.createVolume('vol-2').then(
            () => undefined,
            (err: Error) => err,
          );
          check(!!volumeRefused, problems, 'volume create answered OK on a full data dir');
          check(
            !(await a.api.listVolumes()).some((v) => v.id === 'vol-2'),
            problems,
            'the refused volume create was half applied: the catalog lists it',
          );
          // Nor on the plugin: a volume it created but the catalog could not save is deleted again. (Isolated, the plugin keeps
          // its state in its data dir, on the full disk too, so its CreateVolume may itself fail: the same outcome, no rollback needed.)
          await pollUntil(
            'the unsaved volume deleted on the plugin again',
            () => (!pluginVolumeNames(a).includes('vol-2') ? true : undefined),
            10_000,
          ).catch(() =>
            problems.push(
              `the refused volume create was half applied: the plugin still has volume "vol-2" (${pluginVolumeNames(a).join(', ')})`,
            ),
          );
          const health = await a.watchHealth(1_000);
          check(health.late.length === 0, problems, `health did not answer on a full data dir: ${health.late.join('; ')}`);
          const still = await a.api.getAlloc(first);
          check(
            workloadUp(still) && a.taskPid(first, 'writer') === a.taskPid(first, 'writer'),
            problems,
            'the running workload suffered from the full disk',
          );
        } finally {
          fs.rmSync(filler, { force: true });
        }
        // Space is back: normal service.
        const second = await a
          .runWorkload('1', 'vol-1')
          .catch((err: Error) => (problems.push(`job run once space returned: ${err.message}`), undefined));
        if (second) await a.waitWorkloadsUp([second]).catch((err: Error) => problems.push(`once space returned: ${err.message}`));
        await a.createVolume('vol-2').catch((err: Error) => problems.push(`volume create once space returned: ${err.message}`));
        check(
          fs.readFileSync(path.join(up!.volumes['data']!.hostPath, 'owner.txt'), 'utf8').trim() === first,
          problems,
          'owner.txt of the first workload changed',
        );
      },
      (a) => mountTmpfs(a, '24m'),
    ),
};

/** The round's data dir on a tmpfs of `size`, the round's own mount (not a leak; taken down last). */
function mountTmpfs(a: ChaosAgent, size: string): void {
  fs.mkdirSync(a.dataDir, { recursive: true, mode: 0o700 });
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700`, 'tmpfs', a.dataDir]);
  a.ownMounts.push(a.dataDir);
}

export const fullLogsScenario = fullLogsDiskScenario({ withAgent, check, fillUp, mountTmpfs });

/** The names of the volumes the hostpath plugin keeps (its volumes.json in the plugin state dir). */
function pluginVolumeNames(a: ChaosAgent): string[] {
  try {
    const doc = JSON.parse(fs.readFileSync(path.join(a.pluginState, 'volumes.json'), 'utf8')) as { volumes?: { name: string }[] };
    return (doc.volumes ?? []).map((v) => v.name);
  } catch {
    return [];
  }
}

type Corruption = 'garbage' | 'damaged page' | 'empty';
const CORRUPTIONS: readonly Corruption[] = ['garbage', 'damaged page', 'empty'];

function sha256(file: string): string {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/**
 * A state file that is not what the agent wrote: garbage or a damaged page is
 * refused at start with a message naming the file, which is kept byte for
 * byte; with the good file back, the agent picks everything up again. An
 * empty (0-byte) file starts empty but says so, and -reconcile-orphans
 * cleans what the lost state left running.
 */
export const corruptStateScenario: Scenario = {
  name: 'storage: corrupt state file',
  rounds: { ci: CORRUPTIONS.length, full: 3 * CORRUPTIONS.length },
  labelOf: (i) => `state.db ${CORRUPTIONS[i % CORRUPTIONS.length]!}`,
  round: (i) => {
    const kind = CORRUPTIONS[i % CORRUPTIONS.length]!;
    return withAgent(`state.db ${kind}`, { restoreLimitMs: PATIENT_RESTORE_MS }, async (a, problems) => {
      await a.start();
      await a.runPlugin();
      await a.createVolume('vol-0');
      const id = await a.runWorkload('0', 'vol-0');
      await a.waitWorkloadsUp([id]);
      await a.kill('SIGTERM');
      const file = path.join(a.dataDir, 'state.db');
      const saved = path.join(a.root, 'state.db.good');
      fs.copyFileSync(file, saved);
      if (kind === 'garbage') fs.writeFileSync(file, Buffer.from('this is not a SQLite database, it was overwritten\n'.repeat(200)));
      else if (kind === 'empty') fs.truncateSync(file, 0);
      else {
        // A valid header, a damaged page: SQLite opens it and finds the damage on reading.
        const bytes = fs.readFileSync(file);
        const pageSize = bytes.readUInt16BE(16) || 4096;
        for (let off = pageSize; off < bytes.length; off += pageSize) bytes.fill(0xa5, off + 8, Math.min(bytes.length, off + pageSize));
        fs.writeFileSync(file, bytes);
      }
      const corruptHash = sha256(file);
      let logFrom = a.log.length;
      if (kind === 'empty') {
        // The catalog is gone with the state, the plugin keeps vol-0: a disagreement made on purpose, not counted.
        a.compareVolumes = false;
        // Starts empty, but says so and names the file; with reconcile_orphans the orphans it left are cleaned.
        await a.start();
        check(
          a.log.slice(logFrom).includes(file),
          problems,
          `an empty state file was taken without a word naming it: ${a.log.slice(logFrom).slice(-500)}`,
        );
        await a.kill('SIGTERM');
        a.extraConfig += '\nreconcile_orphans = true\n';
        await a.start();
        await pollUntil(
          'the orphans (the workload, the plugin, their mounts) cleaned up',
          async () => {
            const left = processesUnder(a.root, [a.proc!.pid!]);
            return mountsUnder(a.dataDir).length === 0 && left.length === 0 && containersUnder(a.root).length === 0 ? true : undefined;
          },
          20_000,
        ).catch((err: Error) => problems.push(`with reconcile_orphans = true: ${err.message}`));
        return;
      }
      logFrom = a.log.length;
      const refused = await a.start().then(
        () => undefined,
        (err: Error) => err,
      );
      if (check(!!refused, problems, `the agent started on a ${kind} state file`)) {
        check(
          a.log.slice(logFrom).includes(file),
          problems,
          `the refusal does not name the file ${file}: ${a.log.slice(logFrom).slice(-400)}`,
        );
      } else {
        await a.kill('SIGKILL');
      }
      check(sha256(file) === corruptHash, problems, 'the corrupt state file was changed');
      // The good file back: everything is picked up again.
      for (const side of ['-wal', '-shm']) fs.rmSync(`${file}${side}`, { force: true });
      fs.copyFileSync(saved, file);
      await a.start();
      await a.waitWorkloadsUp([id]).catch((err: Error) => problems.push(`with the good state file back: ${err.message}`));
    });
  },
};

// ---- 4. plugin away ------------------------------------------------------------------

/**
 * kill -9 of the agent; the plugin kept away (its task killed, its restarts
 * without a socket) for 2–5 × plugin_wait_restore; the agent back: no live
 * workload stopped, no mount lost, every file intact; once the plugin
 * returns, job stop unmounts cleanly.
 */
function awayLabel(i: number): string {
  return `plugin away ${2 + (i % 4)} × plugin_wait_restore, 3 workloads`;
}

export const pluginAwayScenario: Scenario = {
  name: 'plugin away',
  rounds: { ci: 2, full: 20 },
  labelOf: (i) => awayLabel(i),
  round: (i) => {
    const factor = 2 + (i % 4);
    const workloads = 3;
    return withAgent(awayLabel(i), {}, async (a, problems) => {
      await a.start();
      await a.runPlugin({ controllerPublish: i % 2 === 1 });
      const names = Array.from({ length: workloads }, (_, k) => String(k));
      for (const n of names) await a.createVolume(`vol-${n}`);
      const ids = await Promise.all(names.map((n) => a.runWorkload(n, `vol-${n}`)));
      const before = await a.waitWorkloadsUp(ids);
      const pids = new Map(ids.map((id) => [id, a.taskPid(id, 'writer')]));
      await a.kill('SIGKILL');
      a.setPluginFaults({ startFault: 'no-socket' });
      a.killPlugin();
      await a.start();
      const watch = await a.watchHealth(factor * RESTORE_LIMIT_MS);
      check(
        watch.late.length === 0,
        problems,
        `health answered late or not at all while the plugin was away: ${watch.late.slice(0, 3).join('; ')}`,
      );
      const plugin = await a.api.getPlugin(PLUGIN_ID).catch(() => undefined);
      check(!plugin || plugin.nodesHealthy === 0, problems, 'the plugin was not away (it answered healthy)');
      for (const b of before) {
        const now = await a.api.getAlloc(b.id);
        const hostPath = b.volumes['data']!.hostPath;
        check(
          isAlive(pids.get(b.id)!) && now.clientStatus === 'running' && now.tasks['writer']!.state === 'running',
          problems,
          `workload ${b.name} was stopped while the plugin was away: ${now.clientStatus}; ${describeEvents(now)}`,
        );
        check(mountsUnder(hostPath).includes(hostPath), problems, `workload ${b.name}: its mount was lost while the plugin was away`);
        check(
          fs.existsSync(path.join(hostPath, 'owner.txt')) && fs.readFileSync(path.join(hostPath, 'owner.txt'), 'utf8').trim() === b.id,
          problems,
          `workload ${b.name}: owner.txt not intact`,
        );
      }
      // The plugin returns.
      a.setPluginFaults(undefined);
      a.killPlugin();
      await a.waitPluginHealthy().catch((err: Error) => problems.push(`the plugin did not come back: ${err.message}`));
      for (const b of before) {
        const now = await a.api.getAlloc(b.id);
        check(
          now.tasks['writer']!.restarts === 0 && a.taskPid(b.id, 'writer') === pids.get(b.id),
          problems,
          `workload ${b.name} was restarted`,
        );
      }
      for (const n of names) {
        await a.api.stopJob(`work-${n}`).catch((err: Error) => problems.push(`job stop work-${n}: ${err.message}`));
      }
      check(a.volumeMounts().length === 0, problems, `job stop left mounts: ${a.volumeMounts().join(', ')}`);
      for (const n of names)
        check((await a.api.getVolume(`vol-${n}`)).claims.length === 0, problems, `vol-${n} still claimed after job stop`);
    });
  },
};

/** Every scenario, in the table's order. */
export const ALL_SCENARIOS: readonly Scenario[] = [
  crashPointScenario,
  randomKillScenario,
  pluginFaultScenarioFull,
  fullDiskScenario,
  fullLogsScenario,
  corruptStateScenario,
  pluginAwayScenario,
];
