// Public face of @csiplug/driver: the TaskDriver contract and its tokens, the
// exec driver and its registration, the restart tracker, and the layout of
// the executor's files in a task dir (the agent keeps that dir private and
// reads the pid record in its demo). The executor itself is not exported: it
// is a program, run by path. Test doubles live in @csiplug/driver/testing.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './driver';
export * from './errors';
export * from './exec-driver';
export * from './isolation';
export { EXECUTOR_DIR, executorPaths, type ExecutorExitRecord, type ExecutorPaths, type ExecutorPidRecord } from './executor-protocol';
export * from './proc';
export * from './register';
export * from './restart-tracker';
export * from './task-logs';
export * from './tokens';
