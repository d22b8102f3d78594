// Public face of @csiplug/core.
// tsyringe's decorators need the Reflect metadata API before anything loads: this package brings it, so no user has to.
import 'reflect-metadata';
export * from './abort';
export * from './clock';
export * from './crash-point';
export * from './di';
export * from './disposable';
export * from './duration';
export * from './go-duration';
export * from './errors';
export * from './event';
export * from './heartbeat';
export * from './ids';
export * from './logger';
export * from './log-sink';
export * from './metrics';
export * from './module';
export * from './mountinfo';
export * from './random';
export * from './records';
export * from './register';
export * from './timeout-policy';
export * from './token-owners';
export * from './tokens';
export * from './transient';
export * from './vocabulary';
export * from './wait';
