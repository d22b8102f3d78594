// The alloc routes: list, read, the volumes' usage, and a task's log
// (Nomad's fs logs parameters; only the range asked for is read, whatever
// the file's size: alloc-logs.ts).
import type { Logger } from '@csiplug/core';
import { logLimit, readLogJson, sendLogBytes } from '../alloc-logs';
import { ApiError } from '../api-error';
import type { AllocLogs } from '../protocol';
import { boolParam, intParam, oneOf } from '../route-params';
import type { AgentService } from '../service';
import { CALLS_PLUGIN, type Lookups, type RouteTable, WRITES_OWN_RESPONSE } from './route-context';

export function addAllocRoutes(r: RouteTable, s: AgentService, find: Lookups, logger: Logger): void {
  r.add('GET', '/v1/allocations', () => ({ body: s.listAllocs() }));
  r.add('GET', '/v1/allocation/:id', ({ params }) => ({ body: find.alloc(params.id!) }));
  r.add(
    'GET',
    '/v1/allocation/:id/usage',
    async ({ params }) => ({ body: await s.volumeUsage({ allocId: find.alloc(params.id!).id }) }),
    CALLS_PLUGIN,
  );
  r.add(
    'GET',
    '/v1/allocation/:id/logs/:task',
    async ({ params, query, res, signal }) => {
      const stream = oneOf(query, 'stream', ['stdout', 'stderr'] as const, 'stdout');
      const origin = oneOf(query, 'origin', ['start', 'end'] as const, 'start');
      const offset = intParam(query, 'offset', 0);
      const plain = boolParam(query, 'plain');
      const limit = logLimit(query.get('limit') ? intParam(query, 'limit', 0) : undefined, plain);
      const alloc = find.alloc(params.id!);
      const task = params.task!;
      const known =
        Object.hasOwn(alloc.tasks, task) || alloc.job.groups.some((g) => g.name === alloc.group && g.tasks.some((t) => t.name === task));
      if (!known)
        throw ApiError.notFound(`alloc ${alloc.id} has no task "${task}" (tasks: ${Object.keys(alloc.tasks).join(', ') || 'none'})`);
      const slice = await s.allocLogs(alloc.id, task, stream, { offset, origin, limit });
      if (!plain) return { body: (await readLogJson(alloc.id, task, stream, slice)) satisfies AllocLogs };
      try {
        await sendLogBytes(res, slice, signal);
      } catch (err) {
        // The reader hung up before the end: nobody is left to tell. A failed file read is the agent's error.
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ERR_STREAM_PREMATURE_CLOSE' && code !== 'ABORT_ERR') throw err;
        logger.debug('log stream closed by the client before its end', { allocId: alloc.id, task, stream });
      }
      return undefined;
    },
    WRITES_OWN_RESPONSE,
  );
}
