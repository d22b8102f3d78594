// Tokens of the contracts every package shares. Each token is a Symbol with
// the same name as the type it stands for.
import type { Disposable } from './disposable';
import type { HeartbeatStrategy } from './heartbeat';
import type { Logger } from './logger';
import type { Metrics } from './metrics';
import type { Random } from './random';
import type { TimeoutPolicy } from './timeout-policy';

/**
 * Where time comes from (RealClock in ./clock, FakeClock in ./testing).
 * Declared here beside its token, not in ./clock, so that ./wait (which
 * RealClock's sleep uses) can name it without importing ./clock back.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` once after `ms`; disposing the handle cancels it. */
  setTimeout(fn: () => void, ms: number): Disposable;
  /** Runs `fn` every `ms`; disposing the handle cancels it. */
  setInterval(fn: () => void, ms: number): Disposable;
  /** Resolves after `ms`, or rejects when `signal` aborts. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export type IClock = Clock;
export const IClock: unique symbol = Symbol('IClock');

export type ILogger = Logger;
export const ILogger: unique symbol = Symbol('ILogger');

export type IRandom = Random;
export const IRandom: unique symbol = Symbol('IRandom');

export type ITimeoutPolicy = TimeoutPolicy;
export const ITimeoutPolicy: unique symbol = Symbol('ITimeoutPolicy');

export type IHeartbeatStrategy = HeartbeatStrategy;
export const IHeartbeatStrategy: unique symbol = Symbol('IHeartbeatStrategy');

export type IMetrics = Metrics;
export const IMetrics: unique symbol = Symbol('IMetrics');
