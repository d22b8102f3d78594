// CsiUnaryCaller: how one CSI unary call goes over the wire once the client
// has accepted it — the deadline from the TimeoutPolicy (probe vs. other
// calls) on the injected clock, retries on retryable codes with backoff and
// jitter that never wait past the deadline, every failure turned into a
// CSIError here, and the call's latency recorded by RPC and final code.
// GrpcCSIClient owns one and keeps the typed surface and the request checks.
import {
  type Clock,
  type Logger,
  type Metrics,
  NullLogger,
  NullMetrics,
  type Random,
  type TimeoutPolicy,
  abortReason,
  defineMetric,
  errorMessage,
  recordSafely,
  secondsSince,
} from '@csiplug/core';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { CSIError } from './errors';
import type { CsiInvoker, InvokeError } from './invoker';
import type { CsiServiceKey } from './proto';
import { type RetryOptions, backoffDelay, resolveRetryOptions } from './retry';

/** Per-call options. */
export interface CSICallOptions {
  /** Abandons the call (and any retry wait); the call rejects with the signal's reason (an AbortError by default). */
  signal?: AbortSignal;
  /** Overrides the TimeoutPolicy deadline for this call (ms, covering all attempts). */
  timeoutMs?: number;
  /** Overrides retry settings for this call (`{ maxAttempts: 1 }` disables retries). */
  retry?: Partial<RetryOptions>;
}

export interface CSIClientDeps {
  timeouts: TimeoutPolicy;
  clock: Clock;
  random: Random;
  logger?: Logger;
  /** Where each call's latency is recorded (CSI_CALL_SECONDS); nothing is recorded without it. */
  metrics?: Metrics;
}

/**
 * Every call the client made, by RPC and the gRPC code it ended with (`OK`,
 * `UNAVAILABLE`, `DEADLINE_EXCEEDED`…): the whole call, retries included, as
 * its caller waited for it. A request the client refused before sending is
 * not a call and is not counted.
 */
export const CSI_CALL_SECONDS = defineMetric({
  name: 'csiplug_csi_call_seconds',
  help: 'CSI calls to plugins: latency in seconds (retries included), by RPC and final gRPC code',
  kind: 'histogram',
  labels: ['rpc', 'code'],
  buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
});

/** One RPC as it is sent: its service, its wire name, and whether it takes the probe deadline. */
export interface CsiRpc {
  service: CsiServiceKey;
  rpc: string;
  probe?: boolean;
}

function isInvokeError(e: unknown): e is InvokeError {
  return typeof e === 'object' && e !== null && typeof (e as InvokeError).code === 'number';
}

export class CsiUnaryCaller {
  private readonly logger: Logger;
  private readonly metrics: Metrics;

  constructor(
    private readonly endpoint: string,
    private readonly invoker: CsiInvoker,
    private readonly deps: CSIClientDeps,
    private readonly retry: RetryOptions,
  ) {
    this.logger = (deps.logger ?? new NullLogger()).child({ component: 'csi-client', endpoint });
    this.metrics = deps.metrics ?? new NullMetrics();
  }

  /** The call as its caller waits for it, retries included; its latency is recorded whatever the outcome. */
  async call<R>(m: CsiRpc, request: object, o: CSICallOptions | undefined): Promise<R> {
    const signal = o?.signal;
    const started = this.deps.clock.now();
    let code = 'OK';
    try {
      return await this.attempts<R>(m, request, o);
    } catch (err) {
      code = err instanceof CSIError ? err.codeName : signal?.aborted ? 'CANCELLED' : 'UNKNOWN';
      throw err;
    } finally {
      recordSafely(() => this.metrics.observe(CSI_CALL_SECONDS, secondsSince(started, this.deps.clock.now()), { rpc: m.rpc, code }));
    }
  }

  /** Sends the request, trying again on a retryable code while the call's budget lasts. */
  private async attempts<R>(m: CsiRpc, request: object, o: CSICallOptions | undefined): Promise<R> {
    const signal = o?.signal;
    const { clock } = this.deps;
    const timeoutMs = o?.timeoutMs ?? (m.probe ? this.deps.timeouts.probe() : this.deps.timeouts.csiCall());
    const retry = o?.retry ? resolveRetryOptions(o.retry, this.retry) : this.retry;
    const deadlineAt = clock.now() + timeoutMs;
    for (let attempt = 1; ; attempt++) {
      // The gRPC deadline is wall-clock; the budget is measured on the injected clock.
      const remaining = deadlineAt - clock.now();
      try {
        return (await this.invoker.unary(m.service, m.rpc, request, new Date(Date.now() + Math.max(0, remaining)), signal)) as R;
      } catch (err) {
        if (signal?.aborted) throw abortReason(signal);
        const error = this.toCSIError(m, err, attempt, timeoutMs);
        if (attempt >= retry.maxAttempts || !retry.retryableCodes.includes(error.grpcCode)) throw error;
        const delay = backoffDelay(attempt, retry, this.deps.random);
        if (clock.now() + delay >= deadlineAt) throw error;
        this.logger.debug('CSI call failed; retrying', { method: m.rpc, attempt, code: error.codeName, delayMs: delay });
        await clock.sleep(delay, signal);
      }
    }
  }

  private toCSIError(m: CsiRpc, err: unknown, attempt: number, timeoutMs: number): CSIError {
    if (isInvokeError(err)) {
      return new CSIError({
        grpcCode: err.code,
        method: m.rpc,
        endpoint: this.endpoint,
        details: err.details ?? err.message ?? '',
        attempts: attempt,
        timeoutMs,
        cause: err,
      });
    }
    return new CSIError({
      grpcCode: GrpcStatus.INTERNAL,
      method: m.rpc,
      endpoint: this.endpoint,
      details: errorMessage(err),
      attempts: attempt,
      timeoutMs,
      cause: err,
    });
  }
}
