// Public face of @csiplug/runner: alloc and task runners, restart tracking,
// orphan cleanup, the job updater and the deployments (rollouts) it runs;
// the node's fingerprint that ${attr.…} interpolation resolves against.
export * from './alloc-health';
export * from './alloc-runner';
export * from './alloc-store';
export * from './job-updater';
export * from './node-fingerprint';
export * from './orphans';
export * from './plugin-drain';
export * from './raw-exec-policy';
export * from './rollout-host';
export * from './rollout';
export * from './task-paths';
export * from './task-runner';
export * from './task-state-writer';
export * from './task-user';
export * from './image-policy';
export * from './archive-path-policy';
export * from './task-image';
export * from './writer-claims';
