// Tokens of the contracts every package shares. Each token is a Symbol with
// the same name as the type it stands for.
import type { Clock } from './clock';
import type { HeartbeatStrategy } from './heartbeat';
import type { Logger } from './logger';
import type { Random } from './random';
import type { TimeoutPolicy } from './timeout-policy';

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
