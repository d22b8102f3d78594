// `csiplug job run|plan|stop|status|validate`.
import { ValidationError, formatGoDuration, parseDuration } from '@csiplug/core';
import { movesAllocs } from '@csiplug/jobspec';
import type { JobSpec } from '@csiplug/jobspec';
import type {
  AllocUpdate,
  ClusterJobView,
  FieldChange,
  GroupPlan,
  JobPlan,
  JobView,
  PendingUnmountView,
  RunJobResult,
} from '@csiplug/api/client';
import { ValidationProblems, jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { UsageError } from './args';
import { type Command, type CommandContext, VERBOSE_FLAG, inputName } from './command';
import { formatKV, formatTable, formatTime, shortId } from './format';
import { defaultMonitorTimeout, monitorRun } from './job-monitor';
import { printList } from './print-list';

/** What Nomad's plan output calls each kind of alloc update. */
const UPDATE_NAMES: Readonly<Record<AllocUpdate, string>> = {
  create: 'create',
  destroy: 'destroy',
  'create/destroy': 'create/destroy update',
  'in-place': 'in-place update',
  ignore: 'ignore',
};

function updateCounts(updates: Readonly<Record<AllocUpdate, number>>): string {
  return (Object.keys(UPDATE_NAMES) as AllocUpdate[])
    .filter((u) => updates[u] > 0)
    .map((u) => `${updates[u]} ${UPDATE_NAMES[u]}`)
    .join(', ');
}

function planTotals(plan: JobPlan): Record<AllocUpdate, number> {
  const totals: Record<AllocUpdate, number> = { create: 0, destroy: 0, 'create/destroy': 0, 'in-place': 0, ignore: 0 };
  for (const g of plan.groups) for (const u of Object.keys(totals) as AllocUpdate[]) totals[u] += g.updates[u];
  return totals;
}

const MARKS = { added: '+', removed: '-', edited: '+/-', changed: '+/-', none: '' } as const;

/** A plan line with its change mark (`+`, `-`, `+/-`), none for an unchanged one (as Nomad prints them). */
function mark(kind: keyof typeof MARKS, line: string, indent: string): string {
  const m = MARKS[kind];
  return m ? `${indent}${m} ${line}` : `${indent}${line}`;
}

function fieldLine(c: FieldChange, indent: string): string {
  const value = c.kind === 'added' ? (c.new ?? '') : c.kind === 'removed' ? (c.old ?? '') : `${c.old} => ${c.new}`;
  const effect = c.effect === 'destructive' ? ' (forces create/destroy update)' : ' (in-place)';
  return mark(c.kind, `${c.field}${value ? `: ${value}` : ''}${effect}`, indent);
}

function groupLines(g: GroupPlan, verbose: boolean): string[] {
  const counts = updateCounts(g.updates);
  const lines = [mark(g.change, `Task Group: "${g.name}"${counts ? ` (${counts})` : ''}`, '')];
  if (g.count.from !== g.count.to && g.change !== 'added' && g.change !== 'removed')
    lines.push(mark('changed', `count: ${g.count.from} => ${g.count.to}`, '  '));
  for (const c of g.fields) lines.push(fieldLine(c, '  '));
  const acting = g.allocs.filter((a) => a.update !== 'ignore');
  if (g.order && g.updates['create/destroy'] > 0) lines.push(`  Order:  ${g.order.kind.replace(/-/g, ' ')}: ${g.order.reason}`);
  if (g.update && g.updates.create + g.updates['create/destroy'] > 0) {
    const u = g.update;
    lines.push(
      `  Update: max_parallel = ${u.maxParallel}, min_healthy_time = ${formatGoDuration(u.minHealthyTime)}, healthy_deadline = ${formatGoDuration(u.healthyDeadline)}, auto_revert = ${u.autoRevert}`,
    );
  }
  if (acting.length) {
    const rows = acting.map((a) => [
      UPDATE_NAMES[a.update],
      a.name,
      a.allocId ? `${shortId(a.allocId, verbose)} (version ${a.version})` : '-',
      a.reason,
    ]);
    lines.push(
      ...formatTable(['Update', 'Alloc', 'ID', 'Why'], rows)
        .split('\n')
        .map((l) => `    ${l}`),
    );
  }
  return lines;
}

/** A plan the way `nomad job plan` lays one out: the job, each group with its changed fields and alloc updates, then a summary. */
export function formatPlan(plan: JobPlan, verbose = false): string {
  const { from, to } = plan.version;
  const jobChange = from === undefined ? 'added' : plan.changed ? 'edited' : 'none';
  const version = from === undefined ? `version ${to}` : from === to ? `version ${to}` : `version ${from} => ${to}`;
  const lines = [mark(jobChange, `Job: "${plan.jobId}" (${version})`, '')];
  for (const c of plan.fields) lines.push(fieldLine(c, '  '));
  for (const g of plan.groups) lines.push(...groupLines(g, verbose));
  lines.push('');
  lines.push(
    plan.underway
      ? `No changes: deployment "${shortId(plan.underway.deploymentId, verbose)}" of version ${plan.underway.jobVersion} is rolling this spec out already; 'job run' would leave it going.`
      : plan.changed
        ? `Changes: ${updateCounts(planTotals(plan)) || 'no alloc changes'}${from !== to ? `; job version ${from ?? 'none'} => ${to}` : ''}. 'job run' would make them.`
        : `No changes: 'job run' would leave job "${plan.jobId}" as it is.`,
  );
  return lines.join('\n');
}

/**
 * Reads the jobspec FILE. A file with several problems is not thrown as
 * one error: each problem is printed on stderr as an `Error:` line of its
 * own, and undefined returned (the command then exits as it does on an
 * error). One problem is thrown, as any error is.
 */
async function readJobspec(ctx: CommandContext, file: string): Promise<JobSpec | undefined> {
  try {
    return await parseJobspec(await ctx.readFile(file), inputName(file));
  } catch (err) {
    if (!(err instanceof ValidationProblems)) throw err;
    for (const p of err.problems) ctx.io.stderr.write(`Error: ${p.message}\n`);
    return undefined;
  }
}

function runLines(result: RunJobResult, verbose: boolean, monitoring: boolean): string {
  if (result.unchanged && result.deploymentId) {
    return `==> Job "${result.jobId}" unchanged (version ${result.version}): deployment "${shortId(result.deploymentId, verbose)}" is rolling it out already and goes on`;
  }
  if (result.unchanged && result.cluster) {
    // In a cluster, the same file again is the same version run again: each node runs its share again (replacing what failed there).
    const slots = result.cluster.placements.map((p) => `    Slot "${p.slot}" on node ${p.node}`);
    return [`==> Job "${result.jobId}" unchanged (version ${result.version}): run again on every node it is placed on`, ...slots].join(
      '\n',
    );
  }
  if (result.unchanged) return `==> Job "${result.jobId}" unchanged (version ${result.version}): nothing to do`;
  const counts = updateCounts(planTotals(result.plan));
  const head = result.replaced
    ? `==> Job "${result.jobId}" updated to version ${result.version}: ${counts || 'no alloc changes'}`
    : `==> Job "${result.jobId}" registered (version ${result.version})`;
  const lines = [head, ...result.allocIds.map((id) => `    Allocation "${id}" created`)];
  if (result.cluster) {
    lines.push(...result.cluster.placements.map((p) => `    Slot "${p.slot}" placed on node ${p.node}`));
    lines.push(...result.cluster.pending.map((u) => `    ${pendingSlots(u)} pending: ${pendingWhy(u.reasons)}`));
    if (result.cluster.placements.length + result.cluster.pending.length === 0)
      lines.push(`    Not placed yet (a pass is under way): see 'csiplug job status ${result.jobId}'`);
  } else if (!result.replaced && result.allocIds.length === 0) lines.push('    No allocations created');
  if (result.deploymentId) {
    const id = shortId(result.deploymentId, verbose);
    lines.push(
      monitoring
        ? `==> Monitoring deployment "${id}" (Ctrl-C stops watching; the job goes on)`
        : `    Deployment "${id}" is rolling it out: see 'csiplug job status ${result.jobId}'`,
    );
  }
  return lines.join('\n');
}

/**
 * job run's exit codes: 0 the deployment succeeded (or there was none to
 * watch: an unchanged job, only in-place updates or stops, -detach, or a
 * watch that stopped at -monitor-timeout); 2 it failed — an allocation
 * failed or was unhealthy, or the deployment was cancelled or replaced by
 * a newer run; errors (a bad file, no agent) exit 1 (main.ts).
 */
export const RUN_EXIT = { ok: 0, failed: 2 } as const;

/** -monitor-timeout as ms: 0 watches until the deployment ends. */
function monitorTimeoutFlag(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  try {
    return parseDuration(text, '-monitor-timeout');
  } catch (err) {
    if (err instanceof ValidationError) throw new UsageError(`${err.message} (0 watches until the deployment ends)`);
    throw err;
  }
}

const jobRun: Command = {
  name: 'job run',
  usageArgs: 'FILE',
  synopsis: 'Run a job from a jobspec file (HCL or JSON) and watch it start',
  help:
    'Parses FILE (HCL, or JSON; "-" reads stdin) here, then submits the job to the agent. A new job starts its allocations. ' +
    'For a job that exists only what changed is done: nothing when the file is unchanged; a new count adds or stops allocations; ' +
    "a change that needs new processes replaces allocations in a rolling deployment, as the group's update block says (see job plan). " +
    'Then, as nomad job run does, it watches the deployment: each allocation it places, with every new task event once ' +
    '(received, waiting for a CSI plugin, plugin ready, volumes mounted, started, restarts and failures), status changes and health, ' +
    'until the deployment ends. Exits 0 when it succeeded; 2 when it failed (an allocation failed or stayed unhealthy past its ' +
    'healthy_deadline) or was cancelled or replaced by a newer run; 1 on an error (a bad file, an agent that cannot be reached: one that stops ' +
    'answering while watched is asked again for about half a minute first). An unchanged job, or one with only in-place updates or ' +
    'stopped allocations, starts no deployment: it returns at once with 0. The watch stops after -monitor-timeout, exiting 0: the ' +
    "deployment goes on, and job status shows it; the default outlasts the deployment's own deadlines, so a script gets its verdict. " +
    'Ctrl-C stops watching, never the job. With -detach (or -json, which prints the submission result) it returns once the change is under way.',
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  flags: [
    VERBOSE_FLAG,
    {
      name: 'detach',
      kind: 'bool',
      help:
        'Return once the job is submitted, printing its allocation and deployment ids, without watching the deployment. ' +
        'A new allocation that needs a write claim another live allocation holds is then placed and waits for the claim ' +
        '(without -detach the run is refused, naming the holder).',
    },
    {
      name: 'monitor-timeout',
      kind: 'string',
      valueName: 'duration',
      dflt: 'the longest the deployment can take by its update blocks (healthy_deadline per round of max_parallel replacements), plus 1m',
      help: 'Stop watching after this long, e.g. 5m, and exit 0: the deployment goes on. 0 watches until it ends.',
    },
  ],
  async run(ctx) {
    const file = ctx.args[0]!;
    const timeoutFlag = monitorTimeoutFlag(ctx.stringFlag('monitor-timeout'));
    const spec = await readJobspec(ctx, file);
    if (!spec) return 1;
    const client = ctx.client();
    // -detach may queue: new allocs that need a write claim a live alloc holds are placed and wait (without it the run is refused).
    const result = await client.runJob(jobToNomadJson(spec), { queue: ctx.flag('detach') });
    if (ctx.json) {
      ctx.printJson(result);
      return RUN_EXIT.ok;
    }
    // An unchanged job whose rollout goes on is that rollout's, not this run's: it is not watched.
    const monitoring = !ctx.flag('detach') && !result.unchanged && result.deploymentId !== undefined;
    ctx.out(runLines(result, ctx.verbose, monitoring));
    if (!monitoring) return RUN_EXIT.ok;
    const verdict = await monitorRun({
      client,
      result,
      out: (line) => ctx.out(line),
      note: (line) => void ctx.io.stderr.write(`${line}\n`),
      verbose: ctx.verbose,
      timeoutMs: timeoutFlag ?? defaultMonitorTimeout(spec, result.plan),
    });
    return verdict.kind === 'failed' ? RUN_EXIT.failed : RUN_EXIT.ok;
  },
};

/**
 * Nomad's exit codes for job plan: 0 no alloc created, destroyed or
 * replaced (in-place updates alone, or nothing), 1 some would be, 255 an
 * error (main.ts maps errors).
 */
export const PLAN_EXIT = { unchanged: 0, changes: 1, error: 255 } as const;

const jobPlan: Command = {
  name: 'job plan',
  usageArgs: 'FILE',
  synopsis: 'Show what job run of a jobspec file would change',
  help:
    'Parses FILE (HCL, or JSON; "-" reads stdin) here and asks the agent what running it would change, without changing anything: ' +
    'per group, the allocations it would create, destroy, replace (create/destroy update, and in which order) or update in place, ' +
    'and the fields that changed. Exits 1 when allocations would be created, destroyed or replaced; 0 when none would ' +
    "(nothing changes, or only in-place updates: a new version recorded, no process touched), as Nomad's does; 255 on an error.",
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  flags: [VERBOSE_FLAG],
  async run(ctx) {
    const file = ctx.args[0]!;
    const spec = await readJobspec(ctx, file);
    if (!spec) return PLAN_EXIT.error;
    const plan = await ctx.client().planJob(jobToNomadJson(spec));
    if (ctx.json) ctx.printJson(plan);
    else ctx.out(formatPlan(plan, ctx.verbose));
    return movesAllocs(plan) ? PLAN_EXIT.changes : PLAN_EXIT.unchanged;
  },
};

const jobValidate: Command = {
  name: 'job validate',
  usageArgs: 'FILE',
  synopsis: 'Check a jobspec file without running it',
  help:
    'Parses and checks FILE (HCL or JSON; "-" reads stdin) here, without talking to the agent, and reports every problem it finds ' +
    'in one pass: one "Error:" line each on stderr, in the order the file has them, each naming its job, group, task and field. ' +
    "A field Nomad has but csiplug does not (datacenters, network, service, constraint, artifact, a docker task's ports, " +
    'template, vault, consul…) is named with what to do instead. Exits 0 when the file is valid, 1 when it is not. ' +
    'job run and job plan check the file the same way before they send it.',
  minArgs: 1,
  maxArgs: 1,
  api: false,
  json: false,
  async run(ctx) {
    const file = ctx.args[0]!;
    const spec = await readJobspec(ctx, file);
    if (!spec) return 1;
    ctx.out(`Job validation successful: job "${spec.id}" with ${spec.groups.length} group(s)`);
    return 0;
  },
};

const jobStop: Command = {
  name: 'job stop',
  usageArgs: 'ID',
  synopsis: 'Stop a running job',
  help: 'Stops every allocation of the job (unmounting its volumes and releasing their claims) and waits until they are stopped. With -purge the job is forgotten as well.',
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  flags: [{ name: 'purge', kind: 'bool', help: 'Forget the job and its allocations once stopped.' }],
  async run(ctx) {
    const id = ctx.args[0]!;
    const job = await ctx.client().stopJob(id, { purge: ctx.flag('purge') });
    if (ctx.json) {
      ctx.printJson(job);
      return 0;
    }
    const purged = ctx.flag('purge') ? ' and purged' : '';
    if (job.answerUnread !== undefined) {
      ctx.out(
        `==> Job "${id}" stopped${purged}; the agent's answer could not be read (${job.answerUnread}): job status ${id} shows its allocations`,
      );
      return 0;
    }
    ctx.out(`==> Job "${job.id}" stopped${purged} (${job.allocs.length} allocation${job.allocs.length === 1 ? '' : 's'})`);
    // A stop whose node plugin is away leaves the mount in place until the plugin is back: said, not hidden behind "stopped".
    for (const p of job.volumeUnmountsPending ?? [])
      ctx.out(`    Allocation "${p.allocId.slice(0, 8)}" stopped, but ${pendingUnmountText(p)}`);
    return 0;
  },
};

/** One pending unmount, for the operator: which volume waits for which plugin, and what makes it run. */
function pendingUnmountText(p: PendingUnmountView): string {
  const volume = `the unmount of its volume "${p.volumeId}" (volume "${p.name}")`;
  if (p.pluginAway) {
    return (
      `${volume} waits for node plugin "${p.pluginId}", which is not running on this node: the volume stays mounted and claimed, ` +
      `and is unmounted and released once the plugin is back (start the job that runs plugin "${p.pluginId}")`
    );
  }
  return `${volume} is pending: node plugin "${p.pluginId}" is here and the unmount is retried${p.lastError ? ` (last error: ${p.lastError})` : ''}`;
}

function allocCounts(job: Pick<JobView, 'allocs'>): string {
  const running = job.allocs.filter((a) => a.clientStatus === 'running').length;
  return `${running}/${job.allocs.length}`;
}

const jobStatus: Command = {
  name: 'job status',
  usageArgs: '[ID]',
  synopsis: 'Show jobs, or one job and its allocations',
  help: 'Without ID, lists every job. With ID, shows the job and its allocations.',
  minArgs: 0,
  maxArgs: 1,
  api: true,
  json: true,
  flags: [VERBOSE_FLAG],
  async run(ctx) {
    const client = ctx.client();
    const id = ctx.args[0];
    if (id === undefined) {
      const jobs = await client.listJobs();
      printList(ctx, {
        answer: jobs,
        items: jobs,
        empty: 'No jobs',
        header: ['ID', 'Name', 'Status', 'Groups', 'Running/Total'],
        row: (j) => [j.id, j.name, j.status, String(j.groups.length), allocCounts(j)],
      });
      return 0;
    }
    const job = await client.getJob(id);
    if (ctx.json) {
      ctx.printJson(job);
      return 0;
    }
    const kv = formatKV([
      ['ID', job.id],
      ['Name', job.name],
      ['Status', job.status],
      ['Version', String(job.version)],
      ['Groups', job.job.groups.map((g) => `${g.name} (count ${g.count})`).join(', ')],
    ]);
    const d = job.deployment;
    const deployment = d
      ? `\n\nLatest Deployment\n${formatKV([
          ['ID', shortId(d.id, ctx.verbose)],
          ['Version', String(d.jobVersion)],
          ['Status', d.status],
          ['Description', d.description],
          ['Started', formatTime(d.createdAt)],
        ])}\n\nDeployed\n${formatTable(
          ['Task Group', 'Desired', 'Placed', 'Healthy', 'Unhealthy'],
          d.groups.map((g) => [g.name, String(g.desired), String(g.placed), String(g.healthy), String(g.unhealthy)]),
        )}`
      : '';
    const allocs = job.allocs.length
      ? formatTable(
          ['ID', 'Name', 'Group', 'Version', 'Desired', 'Status'],
          job.allocs.map((a) => [shortId(a.id, ctx.verbose), a.name, a.group, String(a.jobVersion), a.desiredStatus, a.clientStatus]),
        )
      : 'No allocations';
    const unmounts = (job.volumeUnmountsPending ?? []).map((p) => `    Allocation "${p.allocId.slice(0, 8)}": ${pendingUnmountText(p)}`);
    ctx.out(
      `${kv}${deployment}${job.cluster ? `\n\n${clusterLines(job.cluster)}` : ''}\n\n${job.cluster ? 'Allocations on this node' : 'Allocations'}\n${allocs}` +
        (unmounts.length ? `\n\nVolume Unmounts Pending\n${unmounts.join('\n')}` : ''),
    );
    return 0;
  },
};

/** Where a cluster job's slots are placed, and what no node could take. */
function clusterLines(c: ClusterJobView): string {
  const head = formatKV([
    ['Type', c.type],
    ['Cluster Version', String(c.version)],
    ['Stopped', String(c.stopped)],
    ['Read', formatTime(c.readAt)],
  ]);
  const placed = c.placements.length
    ? formatTable(
        ['Slot', 'Node', 'Version', 'Moved From'],
        c.placements.map((p) => [p.slot, p.node, String(p.jobVersion), p.movedFrom ?? '']),
      )
    : 'No placements';
  const pending = c.pending.length
    ? `\n\nPending (no node can take these now)\n${formatTable(
        ['Slots', 'Why not'],
        c.pending.map((u) => [pendingSlots(u), pendingWhy(u.reasons)]),
      )}`
    : '';
  return `Cluster\n${head}\n\nPlacements\n${placed}${pending}`;
}

function pendingSlots(p: ClusterJobView['pending'][number]): string {
  if (p.count === 0) return 'The job';
  const named = p.slots.map((x) => `"${x}"`).join(', ');
  return p.count > p.slots.length ? `Slots ${named} and ${p.count - p.slots.length} more` : `Slot${p.count === 1 ? '' : 's'} ${named}`;
}

function pendingWhy(reasons: Record<string, string>): string {
  const entries = Object.entries(reasons);
  return entries.length ? entries.map(([node, why]) => `${node}: ${why}`).join('; ') : 'no node is ready';
}

export const JOB_COMMANDS: Command[] = [jobRun, jobPlan, jobStop, jobStatus, jobValidate];
