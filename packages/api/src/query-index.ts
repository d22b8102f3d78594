// Nomad's query metadata on GET answers, and its blocking queries. Nomad
// answers every read with X-Nomad-Index (the raft index of the data, which
// its Go client reads into QueryMeta.LastIndex), X-Nomad-KnownLeader and
// X-Nomad-LastContact; a client that sends `?index=N&wait=5m` is answered
// once the index passes N, or when the wait is over with what there is then.
//
// This agent has no raft log, so the index is the API's own: each answer
// (one path with its query, `index` and `wait` left out) keeps the index of
// the last time its body changed, from one counter that only grows. So the
// index of an answer changes exactly when what it answers changes, which
// is what a blocking query and the Terraform provider's refresh need.
//
// Across restarts the counter must not go back (a client holding index N
// would block on an older, smaller one for its whole wait). The agent's
// event index starts at 1 again in each run, and no counter of the state
// store counts every change an answer can show (plugin health, usage and
// cluster views are never stored), so the counter starts at the wall-clock
// time of the API's start in microseconds: a later run starts above every
// index an earlier one gave, unless that run changed answers more than once
// per microsecond on average (each change is one HTTP request) or the clock
// was set back between the runs. About 1.8e15 today, exact as a double
// (below 2^53, about 9e15, until the 2250s) and as Go's uint64.
import { type Clock, type Disposable, parseDuration } from '@csiplug/core';
import { createHash } from 'crypto';
import { ApiError } from './api-error';
import type { AgentService } from './service';

/** The longest a blocking query waits, and its wait when none is given: Nomad's (5 minutes). */
export const MAX_QUERY_WAIT_MS = 5 * 60_000;
/** How many answers' indexes are kept; one evicted gets a new index when next asked (a spurious change, never a missed one). */
const MAX_KEPT_ANSWERS = 1024;

/** The headers Nomad sets on a read's answer. */
export function queryMetaHeaders(index: number): Record<string, string> {
  return { 'X-Nomad-Index': String(index), 'X-Nomad-KnownLeader': 'true', 'X-Nomad-LastContact': '0' };
}

/** A blocking query's parameters: `index` (wait until the answer's index is past it) and `wait` (a Go duration, at most 5m). */
export function blockingParams(query: URLSearchParams): { minIndex: number; waitMs: number } | undefined {
  const index = query.get('index');
  if (index === null || index === '' || index === '0') return undefined;
  if (!/^\d+$/.test(index) || !Number.isSafeInteger(Number(index)))
    throw ApiError.badRequest(`query parameter index must be a whole number, the X-Nomad-Index of an earlier answer (got "${index}")`);
  const wait = query.get('wait');
  let waitMs = MAX_QUERY_WAIT_MS;
  if (wait !== null && wait !== '') {
    try {
      waitMs = parseDuration(wait, 'wait');
    } catch {
      throw ApiError.badRequest(`query parameter wait must be a duration such as "30s" or "5m" (got "${wait}")`);
    }
  }
  return { minIndex: Number(index), waitMs: Math.min(waitMs, MAX_QUERY_WAIT_MS) };
}

export class AnswerIndexes {
  private last: number;
  /** Per answer key: the digest of the body last answered and the index it got. Map order is least recently used first. */
  private readonly kept = new Map<string, { digest: string; index: number }>();

  constructor(clock: Clock) {
    this.last = Math.floor(clock.now()) * 1000;
  }

  /** The index of `body` as the answer for `key`: the same as before while the body is the same, a new higher one when it changed. */
  indexOf(key: string, body: unknown): number {
    const digest = createHash('sha256')
      .update(JSON.stringify(body) ?? '')
      .digest('base64');
    const known = this.kept.get(key);
    this.kept.delete(key);
    const entry = known && known.digest === digest ? known : { digest, index: ++this.last };
    this.kept.set(key, entry);
    if (this.kept.size > MAX_KEPT_ANSWERS) this.kept.delete(this.kept.keys().next().value!);
    return entry.index;
  }
}

/** The key of an answer: its path and query, without the blocking query's own parameters, in a stable order. */
export function answerKey(pathname: string, query: URLSearchParams): string {
  const rest = [...query].filter(([k]) => k !== 'index' && k !== 'wait').sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `${pathname}?${new URLSearchParams(rest).toString()}`;
}

/**
 * Answers a read, blocking while asked to: `compute` is run, then again after
 * each of the agent's events, until its answer's index passes `minIndex`,
 * the wait is over, or the client is gone (`signal`). A change no event
 * announces is answered when the wait is over, as Nomad answers a query
 * whose wait ran out: with what there is and its index.
 */
export async function answerBlocking<T extends { body: unknown }>(
  options: {
    service: Pick<AgentService, 'onEvent'>;
    clock: Clock;
    indexes: AnswerIndexes;
    key: string;
    blocking: { minIndex: number; waitMs: number } | undefined;
    signal: AbortSignal;
  },
  compute: () => Promise<T | undefined>,
): Promise<{ reply: T; index: number } | undefined> {
  const { indexes, key, blocking, signal } = options;
  let reply = await compute();
  if (!reply) return undefined;
  let index = indexes.indexOf(key, reply.body);
  if (!blocking || index > blocking.minIndex) return { reply, index };

  let wake: (() => void) | undefined;
  let over = false;
  const subscriptions: Disposable[] = [
    options.service.onEvent(() => wake?.()),
    options.clock.setTimeout(() => {
      over = true;
      wake?.();
    }, blocking.waitMs),
  ];
  const onAbort = () => {
    over = true;
    wake?.();
  };
  signal.addEventListener('abort', onAbort);
  try {
    let pending = false;
    for (;;) {
      // Events that came while the answer was computed count: one more look, not a wait.
      if (!pending && !over) await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
      pending = false;
      if (signal.aborted) return { reply, index };
      let changedWhileComputing = false;
      wake = () => (changedWhileComputing = true);
      const next = await compute();
      wake = undefined;
      if (!next) return undefined;
      reply = next;
      index = indexes.indexOf(key, reply.body);
      if (index > blocking.minIndex || over) return { reply, index };
      pending = changedWhileComputing;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    for (const s of subscriptions) s.dispose();
  }
}
