// The alloc routes in Nomad's shapes (wire/alloc-wire.ts): the list
// (AllocationListStub), one alloc (Allocation), the volumes' usage
// (csiplug's own), and a task's log as Nomad's fs logs answers it (only the
// range asked for is read, whatever the file's size; follow=true reads on
// as the task writes: alloc-logs.ts).
import type { Clock, Logger } from '@csiplug/core';
import { Readable } from 'stream';
import { followLog, logLimit, sendLog } from '../alloc-logs';
import { ApiError } from '../api-error';
import type { LogSlice } from '../log-slice';
import { boolParam, intParam, oneOf } from '../route-params';
import type { AgentService } from '../service';
import { type AllocNode, encodeAlloc, encodeAllocStub } from '../wire/alloc-wire';
import { CALLS_PLUGIN, type Lookups, type RouteTable, WRITES_OWN_RESPONSE } from './route-context';

/** This agent's node, which every alloc it lists runs on. */
export function allocNode(s: AgentService): AllocNode {
  const { id, name } = s.node();
  return { id, name };
}

export function addAllocRoutes(r: RouteTable, s: AgentService, find: Lookups, logger: Logger, clock: Clock): void {
  // Nomad's ?prefix= keeps the allocs whose ID starts with it (how `nomad alloc status` finds a short id).
  r.add('GET', '/v1/allocations', ({ query }) => {
    const node = allocNode(s);
    const prefix = query.get('prefix') ?? '';
    return { body: s.listAllocs().flatMap((a) => (a.id.startsWith(prefix) ? [encodeAllocStub(a, node)] : [])) };
  });
  r.add('GET', '/v1/allocation/:id', ({ params }) => ({ body: encodeAlloc(find.alloc(params.id!), allocNode(s)) }));
  r.add(
    'GET',
    '/v1/allocation/:id/usage',
    async ({ params }) => ({ body: await s.volumeUsage({ allocId: find.alloc(params.id!).id }) }),
    CALLS_PLUGIN,
  );
  // Nomad's task log: ?task=&type=stdout|stderr&origin=start|end&offset=&plain=, and csiplug's limit.
  r.add(
    'GET',
    '/v1/client/fs/logs/:id',
    async ({ params, query, res, signal }) => {
      const task = query.get('task');
      if (!task) throw ApiError.badRequest("must provide task name: add ?task= with the name of one of the alloc's tasks");
      const type = query.get('type');
      if (type !== 'stdout' && type !== 'stderr')
        throw ApiError.badRequest('must provide log type (stdout/stderr): add ?type=stdout or ?type=stderr');
      const origin = oneOf(query, 'origin', ['start', 'end'] as const, 'start');
      const offset = intParam(query, 'offset', 0);
      const plain = boolParam(query, 'plain');
      const follow = boolParam(query, 'follow');
      const limit = logLimit(query.get('limit') ? intParam(query, 'limit', 0) : undefined);
      if (follow && limit !== undefined)
        throw ApiError.badRequest('query parameter limit cannot be used with follow=true: a followed log is read to the end of the task');
      const alloc = find.alloc(params.id!);
      const known =
        Object.hasOwn(alloc.tasks, task) || alloc.job.groups.some((g) => g.name === alloc.group && g.tasks.some((t) => t.name === task));
      if (!known)
        throw ApiError.notFound(`alloc ${alloc.id} has no task "${task}" (tasks: ${Object.keys(alloc.tasks).join(', ') || 'none'})`);
      const slice = await s.allocLogs(alloc.id, task, type, { offset, origin, limit });
      try {
        if (!follow) await sendLog(res, slice, plain, signal);
        else {
          const ended = () => {
            const now = s.getAlloc(alloc.id);
            return !now || now.clientStatus === 'complete' || now.clientStatus === 'failed' || now.tasks[task]?.state === 'dead';
          };
          // An alloc purged while followed has no log left to read: nothing more, and `ended` says so.
          const open = async (from: number): Promise<LogSlice> =>
            s.getAlloc(alloc.id)
              ? s.allocLogs(alloc.id, task, type, { offset: from, origin: 'start' })
              : { size: from, start: from, length: 0, stream: Readable.from([]) };
          await followLog(res, slice, { open, ended }, { plain, clock, signal });
        }
      } catch (err) {
        // The reader hung up before the end (or the API is closing): nobody is left to tell. A failed file read is the agent's error.
        const code = (err as NodeJS.ErrnoException).code;
        if (!signal.aborted && code !== 'ERR_STREAM_PREMATURE_CLOSE' && code !== 'ABORT_ERR') throw err;
        logger.debug('log stream closed by the client before its end', { allocId: alloc.id, task, type });
      }
      return undefined;
    },
    WRITES_OWN_RESPONSE,
  );
}
