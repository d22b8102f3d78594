// `csiplug job run|stop|status|validate`.
import type { JobView } from '../service';
import { jobToDocument, parseJobspec } from '../spec';
import { Command, VERBOSE_FLAG, inputName } from './command';
import { formatKV, formatTable, shortId } from './format';

const jobRun: Command = {
  name: 'job run',
  usageArgs: 'FILE',
  synopsis: 'Run a job from a jobspec file (HCL or JSON)',
  help: 'Parses FILE (HCL, or JSON; "-" reads stdin) here, then submits the job to the agent, which starts its allocations. Running a job that exists replaces it: its old allocations are stopped.',
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  async run(ctx) {
    const file = ctx.args[0]!;
    const spec = await parseJobspec(await ctx.readFile(file), inputName(file));
    const result = await ctx.client().runJob(jobToDocument(spec));
    if (ctx.json) {
      ctx.printJson(result);
      return 0;
    }
    const lines = [`==> Job "${result.jobId}" ${result.replaced ? 'updated: its previous allocations were stopped' : 'registered'}`];
    for (const id of result.allocIds) lines.push(`    Allocation "${id}" created`);
    if (result.allocIds.length === 0) lines.push('    No allocations created');
    ctx.out(lines.join('\n'));
    return 0;
  },
};

const jobValidate: Command = {
  name: 'job validate',
  usageArgs: 'FILE',
  synopsis: 'Check a jobspec file without running it',
  help: 'Parses and checks FILE (HCL or JSON; "-" reads stdin) here, without talking to the agent.',
  minArgs: 1,
  maxArgs: 1,
  api: false,
  json: false,
  async run(ctx) {
    const file = ctx.args[0]!;
    const spec = await parseJobspec(await ctx.readFile(file), inputName(file));
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
    ctx.out(`==> Job "${job.id}" stopped${ctx.flag('purge') ? ' and purged' : ''} (${job.allocs.length} allocation${job.allocs.length === 1 ? '' : 's'})`);
    return 0;
  },
};

function allocCounts(job: JobView): string {
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
      if (ctx.json) ctx.printJson(jobs);
      else if (jobs.length === 0) ctx.out('No jobs');
      else ctx.out(formatTable(['ID', 'Name', 'Status', 'Groups', 'Running/Total'], jobs.map((j) => [j.id, j.name, j.status, String(j.job.groups.length), allocCounts(j)])));
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
      ['Groups', job.job.groups.map((g) => `${g.name} (count ${g.count})`).join(', ')],
    ]);
    const allocs = job.allocs.length
      ? formatTable(
          ['ID', 'Name', 'Group', 'Desired', 'Status'],
          job.allocs.map((a) => [shortId(a.id, ctx.verbose), a.name, a.group, a.desiredStatus, a.clientStatus]),
        )
      : 'No allocations';
    ctx.out(`${kv}\n\nAllocations\n${allocs}`);
    return 0;
  },
};

export const JOB_COMMANDS: Command[] = [jobRun, jobStop, jobStatus, jobValidate];
