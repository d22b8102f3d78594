// The alloc routes in Nomad's shapes (wire/alloc-wire.ts): the list
// (AllocationListStub), one alloc (Allocation), the volumes' usage
// (csiplug's own), and a task's log as Nomad's fs logs answers it (only the
// range asked for is read, whatever the file's size; follow=true reads on
// as the task writes: alloc-logs.ts). Parameters, texts and codes as
// Nomad's command/agent/fs_endpoint.go and client/fs_endpoint.go.
import type { Clock, Logger } from '@csiplug/core';
import { followLog, logLimit, sendLog } from '../alloc-logs';
import { ApiError } from '../api-error';
import type { LogSlice } from '../log-slice';
import { goBoolParam, goInt64Param, intParam, oneOf } from '../route-params';
import type { AgentService } from '../service';
import { type AllocNode, encodeAlloc, encodeAllocStub } from '../wire/alloc-wire';
import { CALLS_PLUGIN, type Lookups, type RouteTable, WRITES_OWN_RESPONSE } from './route-context';

/** This agent's node, which every alloc it lists runs on. */
export function allocNode(s: AgentService): AllocNode {
  const { id, name, datacenter } = s.node();
  return { id, name, ...(datacenter !== undefined ? { datacenter } : {}) };
}

/**
 * Nomad's offset and origin as client/fs_endpoint.go reads them: a negative
 * offset counts the other way (origin=start&offset=-5 is 5 bytes back from
 * the end), and one past either end of the file stops there.
 */
export function nomadLogRange(origin: 'start' | 'end', offset: number): { origin: 'start' | 'end'; offset: number } {
  if (offset < 0) return { origin: origin === 'end' ? 'start' : 'end', offset: -offset };
  return { origin, offset };
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
      const range = nomadLogRange(oneOf(query, 'origin', ['start', 'end'] as const, 'start'), goInt64Param(query, 'offset'));
      const plain = goBoolParam(query, 'plain');
      const follow = goBoolParam(query, 'follow');
      const limit = logLimit(query.get('limit') ? intParam(query, 'limit', 0) : undefined);
      if (follow && limit !== undefined)
        throw ApiError.badRequest('query parameter limit cannot be used with follow=true: a followed log is read to the end of the task');
      const alloc = find.alloc(params.id!);
      // Nomad's texts and codes (client/fs_endpoint.go): a task the alloc does not have is the caller's error, one not started yet has no logs.
      const known =
        Object.hasOwn(alloc.tasks, task) || alloc.job.groups.some((g) => g.name === alloc.group && g.tasks.some((t) => t.name === task));
      if (!known)
        throw ApiError.badRequest(`unknown task name "${task}": the alloc's tasks are ${Object.keys(alloc.tasks).join(', ') || 'none'}`);
      if (alloc.tasks[task]?.startedAt === undefined) throw ApiError.notFound(`task "${task}" not started yet. No logs available`);
      const slice = await s.allocLogs(alloc.id, task, type, { ...range, limit });
      try {
        if (!follow) await sendLog(res, slice, plain, signal);
        else {
          // An alloc purged while followed has no log left to read: the answer ends (also when it goes between the look and the read).
          const open = async (from: number, file?: number): Promise<LogSlice | undefined> => {
            if (!s.getAlloc(alloc.id)) return undefined;
            try {
              return await s.allocLogs(alloc.id, task, type, { offset: from, origin: 'start', ...(file ? { file } : {}) });
            } catch (err) {
              if (!s.getAlloc(alloc.id)) return undefined;
              throw err;
            }
          };
          await followLog(res, slice, { open }, { plain, clock, signal });
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
