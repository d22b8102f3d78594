// /v1/event/stream: the agent's events as newline-delimited JSON, one
// AgentEvent per line, with a `{}` heartbeat line every 10 s so proxies and
// idle timeouts keep the connection open. Closing either side disposes the
// subscription and the heartbeat.
import type { Clock, Disposable, Logger } from '@csiplug/core';
import { DisposableStore, toDisposable } from '@csiplug/core';
import type { ServerResponse } from 'http';
import type { AgentEvent, AgentService } from '../service';
import { ApiError } from './api-error';

export const EVENT_TOPICS: readonly AgentEvent['topic'][] = ['Task', 'Alloc', 'Plugin', 'Volume', 'Job', 'Node'];
export const EVENT_HEARTBEAT_MS = 10_000;
/** A client that lets this much output pile up unread is cut off. */
export const EVENT_STREAM_MAX_BUFFER = 4 * 1024 * 1024;

/**
 * Reads `topic` query values (repeatable, comma-separated; Nomad's `Task:*`
 * form is accepted and means the whole topic). None means every topic.
 */
export function parseTopics(values: string[]): Set<AgentEvent['topic']> | undefined {
  const names = values.flatMap((v) => v.split(',')).map((v) => v.trim()).filter((v) => v !== '');
  if (names.length === 0) return undefined;
  const topics = new Set<AgentEvent['topic']>();
  for (const raw of names) {
    const name = raw.endsWith(':*') ? raw.slice(0, -2) : raw;
    if (name === '*') return undefined;
    const topic = EVENT_TOPICS.find((t) => t.toLowerCase() === name.toLowerCase());
    if (!topic) throw ApiError.badRequest(`unknown event topic "${raw}" (known: ${EVENT_TOPICS.join(', ')})`);
    topics.add(topic);
  }
  return topics;
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
    topics: Set<AgentEvent['topic']> | undefined,
    clock: Clock,
    private readonly logger: Logger,
    heartbeatMs: number = EVENT_HEARTBEAT_MS,
    /** Aborted when the client's connection is gone (a queued pipelined response never sees 'close'). */
    signal?: AbortSignal,
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
    this.store.add(
      service.onEvent((e) => {
        if (topics && !topics.has(e.topic)) return;
        this.write(`${JSON.stringify(e)}\n`);
      }),
    );
    this.store.add(clock.setInterval(() => this.write('{}\n'), heartbeatMs));
    const onClose = () => this.dispose();
    res.on('close', onClose);
    this.store.add(toDisposable(() => res.off('close', onClose)));
    if (signal) {
      if (signal.aborted) queueMicrotask(onClose);
      signal.addEventListener('abort', onClose, { once: true });
      this.store.add(toDisposable(() => signal.removeEventListener('abort', onClose)));
    }
  }

  private write(line: string): void {
    if (this.closed) return;
    if (this.res.writableLength > EVENT_STREAM_MAX_BUFFER) {
      this.logger.warn('event stream client is not reading; closing its stream', { buffered: this.res.writableLength });
      this.res.destroy();
      this.dispose();
      return;
    }
    this.res.write(line);
  }

  dispose(): void {
    if (this.closed) return;
    this.closed = true;
    this.store.dispose();
    if (!this.res.writableEnded) this.res.end();
    this.resolveDone();
  }
}
