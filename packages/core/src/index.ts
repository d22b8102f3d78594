// Public face of @csiplug/core.
export * from './abort';
export * from './clock';
export * from './di';
export * from './disposable';
export * from './duration';
export * from './errors';
export * from './event';
export * from './heartbeat';
export * from './ids';
export * from './logger';
export * from './mountinfo';
export * from './random';
export * from './records';
export * from './register';
export * from './timeout-policy';
export * from './tokens';
export * from './transient';
export * from './wait';
/**
 * @deprecated FakeClock is test support: import it from @csiplug/core/testing.
 * Re-exported here only until every test has moved its import.
 */
export { FakeClock, flushMicrotasks } from './testing/fake-clock';
