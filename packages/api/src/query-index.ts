// Nomad's query metadata on GET answers, and its blocking queries. Nomad
// answers every read with X-Nomad-Index (the raft index of the data, which
// its Go client reads into QueryMeta.LastIndex), X-Nomad-KnownLeader and
// X-Nomad-LastContact, and every write with the X-Nomad-Index it was
// applied at; a client that sends `?index=N&wait=5m` is answered once the
// index passes N, or when the wait (default 5m, at most 5m, plus up to
// wait/16 of jitter, as Nomad's blockingRPC) is over with what there is then.
//
// This agent has no raft log, so the index is the API's own: each answer
// (one path with its query, `index` and `wait` left out, kept as its
// SHA-256) keeps the index of the last time its body changed, and each
// write takes a new one, all from one counter that only grows. So the index
// of an answer changes exactly when what it answers changes, which is what a
// blocking query and the Terraform provider's refresh need. A write's
// index is above every index given before it, and an answer the write
// changed gets a higher one still when next read; but an answer whose body
// comes back to one it had before (a volume registered and deleted between
// two reads, a job run again unchanged) keeps its earlier, lower index. So
// block on the index of a read, as Nomad's own clients do; blocking on a
// write's index may wait for the next change. (Nomad's indexes are per
// table and its writes always move their table's: a difference kept so
// that an answer's index moves only when the answer does.)
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
import { type Clock, type Disposable, type Event } from '@csiplug/core';
import { createHash, randomInt } from 'crypto';
import { ApiError } from './api-error';
import type { AgentEvent } from './service';

/** A blocking query's wait when none is given (or 0): Nomad's DefaultQueryTime, 5 minutes. */
export const DEFAULT_QUERY_WAIT_MS = 5 * 60_000;
/** The longest wait a blocking query may ask for: Nomad's maxQueryTime (nomad/rpc.go), 5 minutes (a longer one is cut to it). */
export const MAX_QUERY_WAIT_MS = 5 * 60_000;
/** Nomad adds a random stagger of up to wait/16 (its JitterFraction), so held clients do not all come back at once. */
const JITTER_FRACTION = 16;
/** How many answers' indexes are kept; one evicted gets a new index when next asked (a spurious change, never a missed one). */
const MAX_KEPT_ANSWERS = 1024;

/** The headers Nomad sets on a read's answer (a write's carries X-Nomad-Index alone: http-api.ts). */
export function queryMetaHeaders(index: number): Record<string, string> {
  return { 'X-Nomad-Index': String(index), 'X-Nomad-KnownLeader': 'true', 'X-Nomad-LastContact': '0' };
}

const GO_DURATION_UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, μs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const GO_DURATION = /^[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$/;
const GO_DURATION_PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g;

/** A Go duration (Go's time.ParseDuration: "300ms", "1m30s", "-1.5h", "0") in milliseconds, or undefined when the text is not one. */
export function parseGoDuration(text: string): number | undefined {
  if (text === '0' || text === '+0' || text === '-0') return 0;
  if (!GO_DURATION.test(text)) return undefined;
  let total = 0;
  for (const m of text.matchAll(GO_DURATION_PART)) total += Number(m[1]) * GO_DURATION_UNITS[m[2]!]!;
  return text.startsWith('-') ? -total : total;
}

/**
 * A blocking query's parameters, as Nomad's parseWait and blockingRPC take
 * them: `index` (wait until the answer's index is past it; absent or 0: no
 * blocking) and `wait` (a Go duration; absent, 0 or negative: 5m; at most
 * 5m), plus a random stagger of up to wait/16. `random(n)` picks a whole
 * number below n (crypto's randomInt unless a test gives its own). A `wait`
 * that is no duration is refused with or without `index`, as Nomad's
 * parseWait refuses it.
 */
export function blockingParams(
  query: URLSearchParams,
  random: (below: number) => number = (below) => (below > 0 ? randomInt(below) : 0),
): { minIndex: number; waitMs: number } | undefined {
  const wait = query.get('wait');
  let waitMs = DEFAULT_QUERY_WAIT_MS;
  if (wait !== null && wait !== '') {
    const parsed = parseGoDuration(wait);
    if (parsed === undefined)
      throw ApiError.badRequest(`query parameter wait must be a Go duration such as "30s", "5m" or "1m30s" (got "${wait}")`);
    if (parsed > 0) waitMs = Math.min(parsed, MAX_QUERY_WAIT_MS);
  }
  const index = query.get('index');
  if (index === null || index === '' || index === '0') return undefined;
  if (!/^\d+$/.test(index) || !Number.isSafeInteger(Number(index)))
    throw ApiError.badRequest(`query parameter index must be a whole number, the X-Nomad-Index of an earlier answer (got "${index}")`);
  return { minIndex: Number(index), waitMs: waitMs + random(Math.floor(waitMs / JITTER_FRACTION)) };
}

/** The SHA-256 of a text, base64: what is kept of a body or of a client's answer key. */
function sha256(text: string): string {
  return createHash('sha256').update(text).digest('base64');
}

export class AnswerIndexes {
  private last: number;
  /** Per answer key's SHA-256 (a key is the client's own path and query: only its digest is kept, so memory grows with the count alone): the digest of the body last answered and the index it got. Map order is least recently used first. */
  private readonly kept = new Map<string, { digest: string; index: number }>();

  constructor(clock: Clock) {
    this.last = Math.floor(clock.now()) * 1000;
  }

  /** The index of `body` as the answer for `key`: the same as before while the body is the same, a new higher one when it changed. */
  indexOf(key: string, body: unknown): number {
    const keyDigest = sha256(key);
    const digest = sha256(JSON.stringify(body) ?? '');
    const known = this.kept.get(keyDigest);
    this.kept.delete(keyDigest);
    const entry = known && known.digest === digest ? known : { digest, index: ++this.last };
    this.kept.set(keyDigest, entry);
    if (this.kept.size > MAX_KEPT_ANSWERS) this.kept.delete(this.kept.keys().next().value!);
    return entry.index;
  }

  /** A new index, above every one given so far: a write's (Nomad answers each write with the index it was applied at). */
  next(): number {
    return ++this.last;
  }

  /** The characters the kept answer keys take, in all (for tests). */
  get keptKeyChars(): number {
    let total = 0;
    for (const key of this.kept.keys()) total += key.length;
    return total;
  }
}

/** The key of an answer: its path and query, without the blocking query's own parameters, in a stable order. */
export function answerKey(pathname: string, query: URLSearchParams): string {
  const rest = [...query].filter(([k]) => k !== 'index' && k !== 'wait').sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `${pathname}?${new URLSearchParams(rest).toString()}`;
}

/**
 * One compute per answer key at a time for the blocking queries woken by
 * the same events: a held query that looks again joins a compute of its key
 * already under way, unless an event came after that compute started (its
 * answer may not show it). So a hundred clients held on one answer cost one
 * compute per event, not a hundred.
 */
export class SharedComputes {
  /**
   * Grows with each of the agent's events, counted by the held queries'
   * own listeners (each counts each event: only whether it grew matters).
   * Whenever a compute is under way its query listens, so none is missed.
   */
  private events = 0;
  private readonly running = new Map<string, { events: number; answer: Promise<unknown> }>();

  /** An event came (a held query's listener says so). */
  noteEvent(): void {
    this.events++;
  }

  run<T>(key: string, compute: () => Promise<T>): Promise<T> {
    const under = this.running.get(key);
    if (under && under.events === this.events) return under.answer as Promise<T>;
    const entry = { events: this.events, answer: compute() as Promise<unknown> };
    this.running.set(key, entry);
    const forget = () => {
      if (this.running.get(key) === entry) this.running.delete(key);
    };
    entry.answer.then(forget, forget);
    return entry.answer as Promise<T>;
  }
}

/**
 * Answers a read, blocking while asked to. Without `blocking` (no index, or
 * a route that answers at once) `compute` runs once. Blocking, it subscribes
 * to the agent's events first (so an event during the first compute is not
 * missed), then runs `compute`, and again (shared with identical held
 * queries: `shared`) after each event, until its answer's index passes
 * `minIndex` or the wait is over. A change no event announces is answered
 * when the wait is over, as Nomad answers a query whose wait ran out: with
 * what there is and its index. When `signal` aborts (the client is gone,
 * the API closes, the caller's token is no longer valid) it starts no
 * further compute: it ends with the last answer once a compute under way
 * (whose answer it then is) is done; undefined if there was none.
 */
export async function answerBlocking<T extends { body: unknown }>(
  options: {
    onEvent: Event<AgentEvent>;
    clock: Clock;
    indexes: AnswerIndexes;
    shared: SharedComputes;
    key: string;
    blocking: { minIndex: number; waitMs: number } | undefined;
    signal: AbortSignal;
  },
  compute: () => Promise<T | undefined>,
): Promise<{ reply: T; index: number } | undefined> {
  const { indexes, key, blocking, signal } = options;
  if (!blocking) {
    const reply = await compute();
    return reply && { reply, index: indexes.indexOf(key, reply.body) };
  }
  if (signal.aborted) return undefined;

  let wake: (() => void) | undefined;
  let over = false;
  /** An event came since the answer was last computed (or during it): one more look, not a wait. */
  let changed = false;
  const onAbort = () => wake?.();
  signal.addEventListener('abort', onAbort);
  const subscriptions: Disposable[] = [
    options.onEvent(() => {
      options.shared.noteEvent();
      changed = true;
      wake?.();
    }),
    options.clock.setTimeout(() => {
      over = true;
      wake?.();
    }, blocking.waitMs),
  ];
  try {
    let reply = await compute();
    if (!reply) return undefined;
    let index = indexes.indexOf(key, reply.body);
    while (index <= blocking.minIndex && !over && !signal.aborted) {
      if (!changed) await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
      if (signal.aborted) break;
      changed = false;
      const next = await options.shared.run(key, compute);
      if (!next) return undefined;
      reply = next;
      index = indexes.indexOf(key, reply.body);
    }
    return { reply, index };
  } finally {
    signal.removeEventListener('abort', onAbort);
    for (const s of subscriptions) s.dispose();
  }
}
