// `csiplug alloc status|logs`. Alloc ids may be shortened to any unique
// prefix, as with Nomad.
import { EventEmitter, once } from 'events';
import type { Readable } from 'stream';
import type { ApiClient } from '@csiplug/api/client';
import { ApiError, MAX_JSON_LOG_LIMIT } from '@csiplug/api/client';
import type { AllocView } from '@csiplug/api/client';
import { UsageError } from './args';
import { type Command, isNotFound } from './command';
import { formatKV, formatTable, formatTime, usageText } from './format';
import { prettyTimeDiff } from './nomad-units';
import type { CliOutput } from './io';

/** The alloc with this id, or the one alloc whose id starts with it. */
export async function resolveAlloc(client: ApiClient, idOrPrefix: string): Promise<AllocView> {
  try {
    return await client.getAlloc(idOrPrefix);
  } catch (err) {
    if (!isNotFound(err)) throw err;
    const matches = (await client.listAllocs()).filter((a) => a.id.startsWith(idOrPrefix));
    // A list carries no job: the one match is read whole.
    if (matches.length === 1) return client.getAlloc(matches[0]!.id);
    if (matches.length === 0) throw new ApiError(404, 'ENOT_FOUND', `no alloc with id or id prefix "${idOrPrefix}"`);
    throw new ApiError(
      400,
      'EAMBIGUOUS',
      `the prefix "${idOrPrefix}" matches ${matches.length} allocs (${matches.map((a) => a.id.slice(0, 8)).join(', ')}); give more of the id`,
    );
  }
}

const RECENT_EVENTS = 10;

function describeTask(name: string, alloc: AllocView): string {
  const t = alloc.tasks[name]!;
  const kv = formatKV([
    ['Started At', formatTime(t.startedAt)],
    ['Finished At', formatTime(t.finishedAt)],
    ['Restarts', String(t.restarts)],
    ['Failed', String(t.failed)],
    ...(t.exitCode !== undefined && t.exitCode !== null ? [['Exit Code', String(t.exitCode)] as const] : []),
    ...(t.signal ? [['Signal', t.signal] as const] : []),
  ]);
  const recent = [...t.events].reverse().slice(0, RECENT_EVENTS);
  const events = recent.length
    ? formatTable(
        ['Time', 'Type', 'Description'],
        recent.map((e) => [formatTime(e.time), e.type, e.message]),
      )
    : 'No events';
  return `Task "${name}" is "${t.state}"\n${kv}\n\nRecent Events:\n${events}`;
}

const allocStatus: Command = {
  name: 'alloc status',
  usageArgs: 'ID',
  synopsis: 'Show an allocation: its tasks, their recent events, and its volumes',
  help: 'Shows the allocation ID (or a unique prefix of it): status, CSI volumes, and each task with its recent events.',
  minArgs: 1,
  maxArgs: 1,
  api: true,
  json: true,
  flags: [{ name: 'verbose', kind: 'bool', help: 'Show the time the allocation was created instead of how long ago, as Nomad does.' }],
  async run(ctx) {
    const alloc = await resolveAlloc(ctx.client(), ctx.args[0]!);
    if (ctx.json) {
      ctx.printJson(alloc);
      return 0;
    }
    // Each mounted volume's usage, as its node plugin reports it (NodeGetVolumeStats); a failure to read it is shown, not fatal.
    const usage = Object.keys(alloc.volumes ?? {}).length
      ? await ctx
          .client()
          .allocUsage(alloc.id)
          .catch((err: Error) => err)
      : [];
    const sections: string[] = [
      formatKV([
        ['ID', alloc.id],
        ['Name', alloc.name],
        ['Job ID', alloc.jobId],
        ['Task Group', alloc.group],
        ['Client Status', alloc.clientStatus],
        ['Desired Status', alloc.desiredStatus],
        // As Nomad: how long ago, or the time itself with -verbose.
        ['Created', ctx.verbose ? formatTime(alloc.createdAt) : prettyTimeDiff(alloc.createdAt, Date.now()) || 'N/A'],
      ]),
    ];
    const volumes = Object.values(alloc.volumes ?? {});
    if (volumes.length) {
      sections.push(
        `CSI Volumes:\n${formatTable(
          ['Name', 'Volume ID', 'Plugin ID', 'Read Only', 'Used', 'Host Path'],
          volumes.map((v) => [
            v.name,
            v.volumeId,
            v.pluginId,
            String(v.readOnly),
            usageText(usage instanceof Error ? usage : usage.find((u) => u.name === v.name)),
            v.hostPath,
          ]),
        )}`,
      );
    }
    const tasks = Object.keys(alloc.tasks).sort();
    for (const name of tasks) sections.push(describeTask(name, alloc));
    if (tasks.length === 0) sections.push('No task states yet');
    ctx.out(sections.join('\n\n'));
    return 0;
  },
};

/** With -tail and no -offset: this many bytes back from the end. */
export const DEFAULT_TAIL_BYTES = 4096;

function bytesFlag(text: string | undefined, name: string, min: number): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text)) || Number(text) < min) {
    throw new UsageError(`-${name} must be a whole number of bytes${min > 0 ? ` of at least ${min}` : ''} (got "${text}")`);
  }
  return Number(text);
}

/** Copies the stream to `out` byte for byte, waiting when `out` asks for it (a slow pipe) rather than piling the log up in memory; resolves with the bytes copied. */
async function copyTo(out: CliOutput, stream: Readable): Promise<number> {
  let n = 0;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      n += chunk.length;
      if (out.write(chunk) === false && out instanceof EventEmitter) await once(out, 'drain');
    }
  } finally {
    stream.destroy();
  }
  return n;
}

/** ms between two looks at a followed log (-f). */
export const FOLLOW_POLL_MS = 250;

/**
 * Whether the task has started (so it has a log to read), or is not one of the alloc's (the agent refuses it). With `wait`, looks
 * again every FOLLOW_POLL_MS until it has, or until its alloc has ended
 * without starting it (false then too).
 */
async function taskStarted(client: ApiClient, allocId: string, task: string, wait: boolean): Promise<boolean> {
  for (;;) {
    const alloc = await client.getAlloc(allocId);
    const known = task in alloc.tasks || alloc.job.groups.some((g) => g.name === alloc.group && g.tasks.some((t) => t.name === task));
    // A task the alloc does not have: the agent's answer says so, with the tasks it has.
    if (!known || alloc.tasks[task]?.startedAt !== undefined) return true;
    if (!wait || alloc.desiredStatus !== 'run' || alloc.clientStatus === 'complete' || alloc.clientStatus === 'failed') return false;
    await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS));
  }
}

/**
 * The byte offset from which the log's last `lines` lines start: reads a
 * window from the end, twice as large each time, until it holds that many
 * line breaks or reaches the start.
 */
async function lastLinesOffset(
  client: ApiClient,
  allocId: string,
  task: string,
  stream: 'stdout' | 'stderr',
  lines: number,
): Promise<number> {
  for (let window = 4096; ; window *= 2) {
    const part = await client.allocLogs(allocId, task, {
      stream,
      origin: 'end',
      offset: Math.min(window, MAX_JSON_LOG_LIMIT),
      limit: Math.min(window, MAX_JSON_LOG_LIMIT),
    });
    const text = Buffer.from(part.data, 'utf8');
    // A final line break ends the last line; it starts no new one.
    let end = text.length;
    if (end > 0 && text[end - 1] === 0x0a) end--;
    let found = 0;
    for (let i = end - 1; i >= 0; i--) {
      if (text[i] === 0x0a && ++found === lines) return part.offset + Buffer.byteLength(text.subarray(0, i + 1));
    }
    if (part.offset === 0 || window >= MAX_JSON_LOG_LIMIT) return part.offset;
  }
}

const allocLogs: Command = {
  name: 'alloc logs',
  usageArgs: 'ID [TASK]',
  synopsis: "Print a task's stdout (or stderr) log",
  help:
    'Prints the log of TASK in allocation ID (or a unique prefix of it), byte for byte as the task wrote it, streamed from the agent. ' +
    'TASK may be left out when the allocation has one task. -offset and -limit pick a byte range; with -tail the offset counts back from the end ' +
    `(default ${DEFAULT_TAIL_BYTES} bytes). With -json the range is printed as one AllocLogs object, its text in data (at most -limit bytes, default 64 KiB, at most 4 MiB).`,
  minArgs: 1,
  maxArgs: 2,
  api: true,
  json: true,
  flags: [
    { name: 'stderr', kind: 'bool', help: 'Print stderr instead of stdout.' },
    {
      name: 'offset',
      kind: 'string',
      valueName: 'bytes',
      help: `Start this many bytes into the log, or with -tail this many bytes before its end. Default 0, or ${DEFAULT_TAIL_BYTES} with -tail.`,
    },
    {
      name: 'limit',
      kind: 'string',
      valueName: 'bytes',
      help: 'Print at most this many bytes. Default: to the end of the log (64 KiB with -json).',
    },
    { name: 'tail', kind: 'bool', help: 'Count -offset back from the end of the log.' },
    { name: 'n', kind: 'string', valueName: 'lines', help: 'Print only the last this many lines (as tail -n).' },
    { name: 'f', kind: 'bool', help: 'Follow: after what is there, print what the task writes, until the allocation ends (or Ctrl-C).' },
  ],
  async run(ctx) {
    const client = ctx.client();
    const tail = ctx.flag('tail');
    const offset = bytesFlag(ctx.stringFlag('offset'), 'offset', 0) ?? (tail ? DEFAULT_TAIL_BYTES : 0);
    const limit = bytesFlag(ctx.stringFlag('limit'), 'limit', 1);
    if (ctx.json && limit !== undefined && limit > MAX_JSON_LOG_LIMIT) {
      throw new UsageError(
        `-limit over ${MAX_JSON_LOG_LIMIT} bytes (${MAX_JSON_LOG_LIMIT / 1024 / 1024} MiB) cannot be used with -json; leave out -json to print any amount`,
      );
    }
    const alloc = await resolveAlloc(client, ctx.args[0]!);
    let task = ctx.args[1];
    if (task === undefined) {
      const tasks = alloc.job.groups.find((g) => g.name === alloc.group)?.tasks.map((t) => t.name) ?? Object.keys(alloc.tasks);
      if (tasks.length !== 1)
        throw new UsageError(`allocation ${alloc.id.slice(0, 8)} has ${tasks.length} tasks (${tasks.join(', ')}); name the TASK`);
      task = tasks[0]!;
    }
    const stream = ctx.flag('stderr') ? ('stderr' as const) : ('stdout' as const);
    const follow = ctx.flag('f');
    const linesText = ctx.stringFlag('n');
    if (linesText !== undefined && (!/^\d+$/.test(linesText) || Number(linesText) < 1))
      throw new UsageError(`-n must be a whole number of lines of at least 1 (got "${linesText}")`);
    if (ctx.json && (follow || linesText !== undefined))
      throw new UsageError('-f and -n print the log as it is; they cannot be used with -json');
    if (linesText !== undefined && (ctx.stringFlag('offset') !== undefined || tail))
      throw new UsageError('-n picks where to start by itself; leave out -offset and -tail');
    // A task not started yet has no log (the agent answers Nomad's 404): nothing to print, or with -f wait for it to start.
    if (!(await taskStarted(client, alloc.id, task, follow))) {
      if (ctx.json) ctx.printJson({ allocId: alloc.id, task, stream, offset: 0, nextOffset: 0, size: 0, data: '' });
      return 0;
    }
    let query = { stream, offset, origin: tail ? ('end' as const) : ('start' as const), limit };
    if (linesText !== undefined)
      query = { stream, offset: await lastLinesOffset(client, alloc.id, task, stream, Number(linesText)), origin: 'start', limit };
    if (ctx.json) {
      ctx.printJson(await client.allocLogs(alloc.id, task, query));
      return 0;
    }
    const first = await client.allocLogStream(alloc.id, task, query);
    let next = first.offset + (await copyTo(ctx.io.stdout, first.stream));
    if (!follow) return 0;
    // Follow: read on from where the last read ended, until the alloc has ended and nothing more came (or is gone: purged).
    for (;;) {
      await new Promise((r) => setTimeout(r, FOLLOW_POLL_MS));
      const more = await client.allocLogStream(alloc.id, task, { stream, offset: next, origin: 'start' }).catch((err: unknown) => {
        if (isNotFound(err)) return undefined;
        throw err;
      });
      if (!more) return 0;
      // A log that got shorter (rotated or truncated) is read again from its start.
      if (more.size < next) {
        more.stream.destroy();
        next = 0;
        continue;
      }
      const got = await copyTo(ctx.io.stdout, more.stream);
      next = more.offset + got;
      if (got === 0) {
        const now = await client.getAlloc(alloc.id);
        if (now.clientStatus === 'complete' || now.clientStatus === 'failed') {
          // One last read: what the task wrote just before it ended.
          const last = await client.allocLogStream(alloc.id, task, { stream, offset: next, origin: 'start' });
          await copyTo(ctx.io.stdout, last.stream);
          return 0;
        }
      }
    }
  },
};

export const ALLOC_COMMANDS: Command[] = [allocStatus, allocLogs];
