// /v1/event/stream: the agent's events as newline-delimited JSON, one
// Nomad Events envelope per line (wire/event-wire.ts), with a `{}` heartbeat line every 10 s so proxies and
// idle timeouts keep the connection open. Closing either side disposes the
// subscription and the heartbeat.
//
// What clients leave unread is held in memory, so it is bounded twice: per
// stream (EVENT_STREAM_MAX_BUFFER) and across every stream of the agent
// (EventStreamBudget, EVENT_STREAMS_MAX_BUFFER_TOTAL) — 256 slow readers at
// 4 MiB each would otherwise hold 1 GiB. Over the total, the stream holding
// the most is cut off: the slowest reader goes, the others keep streaming.
import type { Clock, Disposable, Logger } from '@csiplug/core';
import { DisposableStore, toDisposable } from '@csiplug/core';
import type { ServerResponse } from 'http';
import type { AgentEvent, AgentService } from './service';
import { ApiError } from './api-error';
import { type EventTopicFilter, encodeEvent, eventMatches } from './wire/event-wire';

export const EVENT_TOPICS: readonly AgentEvent['topic'][] = ['Task', 'Alloc', 'Plugin', 'Volume', 'Job', 'Node'];
export const EVENT_HEARTBEAT_MS = 10_000;
/** A client that lets this much output pile up unread is cut off. */
export const EVENT_STREAM_MAX_BUFFER = 4 * 1024 * 1024;
/** What every open stream together may hold unread; past it the stream holding the most is cut off. */
export const EVENT_STREAMS_MAX_BUFFER_TOTAL = 16 * 1024 * 1024;

/** A stream as the budget sees it: what it holds unread, and how to cut it off. */
interface BufferedStream {
  buffered(): number;
  cutOff(reason: string): void;
}

/**
 * The bytes all event streams of one API hold unread, bounded in total.
 * Each stream says what it holds after each write and each drain; the sum is
 * of those last readings, so it can only be high (a drain lowers it at the
 * next reading), never low.
 */
export class EventStreamBudget {
  private readonly held = new Map<BufferedStream, number>();
  private total = 0;

  constructor(readonly maxTotal: number = EVENT_STREAMS_MAX_BUFFER_TOTAL) {}

  /** What every stream holds, by the last readings. */
  get heldTotal(): number {
    return this.total;
  }

  /** Takes `stream`'s reading; over the total, cuts off the streams holding the most until the rest fit. */
  update(stream: BufferedStream): void {
    this.set(stream, stream.buffered());
    while (this.total > this.maxTotal) {
      let largest: BufferedStream | undefined;
      let most = -1;
      for (const [s, n] of this.held) {
        if (n > most) {
          most = n;
          largest = s;
        }
      }
      if (!largest) return;
      this.remove(largest);
      largest.cutOff(
        `the event streams of this agent hold ${this.total + most} bytes unread in all (at most ${this.maxTotal}); this one held the most (${most})`,
      );
    }
  }

  remove(stream: BufferedStream): void {
    this.set(stream, 0);
    this.held.delete(stream);
  }

  private set(stream: BufferedStream, bytes: number): void {
    this.total += bytes - (this.held.get(stream) ?? 0);
    this.held.set(stream, bytes);
  }
}

/**
 * Reads Nomad's `topic` query values as its parseEventTopics does
 * (command/agent/event_endpoint.go): each value, repeatable and never split
 * on commas, is `Topic:key`, or a bare `Topic` for the whole topic; `*` as
 * the topic stands for every topic (`*:web`: key web in any topic). A topic
 * csiplug does not send is accepted and lets nothing through (ACLs are off).
 * None means every topic.
 */
export function parseTopics(values: string[]): EventTopicFilter | undefined {
  if (values.length === 0) return undefined;
  const filter: EventTopicFilter = new Map();
  for (const raw of values) {
    const parts = raw.split(':');
    if (parts.length > 2)
      throw ApiError.badRequest(
        `error parsing topics: invalid key value pair for topic, topic: ${raw} (give Topic, Topic:* or Topic:ID, one colon at most)`,
      );
    const [name, key = '*'] = parts as [string, string?];
    filter.set(name, [...(filter.get(name) ?? []), key]);
  }
  return filter;
}

/** One open stream. Disposing it ends the response. */
export class EventStream implements Disposable {
  private readonly store = new DisposableStore();
  private closed = false;
  private resolveDone!: () => void;
  /** Resolves when the stream has ended, from either side. */
  readonly done: Promise<void>;

  constructor(
    service: AgentService,
    private readonly res: ServerResponse,
    topics: EventTopicFilter | undefined,
    clock: Clock,
    private readonly logger: Logger,
    heartbeatMs: number = EVENT_HEARTBEAT_MS,
    /** Aborted when the client's connection is gone (a queued pipelined response never sees 'close'). */
    signal?: AbortSignal,
    /** What all streams of the API may hold unread together (a budget of its own when none is shared). */
    private readonly budget: EventStreamBudget = new EventStreamBudget(),
  ) {
    this.done = new Promise<void>((resolve) => {
      this.resolveDone = resolve;
    });
    res.writeHead(200, {
      'Content-Type': 'application/x-ndjson; charset=utf-8',
      'Cache-Control': 'no-store',
      'X-Content-Type-Options': 'nosniff',
    });
    res.flushHeaders();
    const nodeId = service.health().nodeId;
    this.store.add(
      service.onEvent((e) => {
        const line = encodeEvent(e, nodeId);
        if (!eventMatches(topics, line.Events[0]!)) return;
        this.write(`${JSON.stringify(line)}\n`);
      }),
    );
    this.store.add(clock.setInterval(() => this.write('{}\n'), heartbeatMs));
    const onClose = () => this.dispose();
    res.on('close', onClose);
    this.store.add(toDisposable(() => res.off('close', onClose)));
    const onDrain = () => this.budget.update(this.asBuffered);
    res.on('drain', onDrain);
    this.store.add(toDisposable(() => res.off('drain', onDrain)));
    this.store.add(toDisposable(() => this.budget.remove(this.asBuffered)));
    if (signal) {
      if (signal.aborted) queueMicrotask(onClose);
      signal.addEventListener('abort', onClose, { once: true });
      this.store.add(toDisposable(() => signal.removeEventListener('abort', onClose)));
    }
  }

  /** What this stream holds unread now. */
  get buffered(): number {
    return this.closed ? 0 : this.res.writableLength;
  }

  /** This stream as the budget sees it. */
  private readonly asBuffered: BufferedStream = {
    buffered: () => this.res.writableLength,
    cutOff: (reason) => this.cutOff(reason),
  };

  private write(line: string): void {
    if (this.closed) return;
    if (this.res.writableLength > EVENT_STREAM_MAX_BUFFER) {
      this.cutOff(`it holds ${this.res.writableLength} bytes unread (at most ${EVENT_STREAM_MAX_BUFFER} a stream)`);
      return;
    }
    this.res.write(line);
    this.budget.update(this.asBuffered);
  }

  private cutOff(reason: string): void {
    if (this.closed) return;
    this.logger.warn('event stream client is not reading; closing its stream', { buffered: this.res.writableLength, reason });
    this.res.destroy();
    this.dispose();
  }

  dispose(): void {
    if (this.closed) return;
    this.closed = true;
    this.store.dispose();
    if (!this.res.writableEnded) this.res.end();
    this.resolveDone();
  }
}
