// The shared vocabulary of csiplug, as Nomad keeps its own in nomad/structs
// below its jobspec parser: small pure constants, pure functions and types
// that the jobspec reader (@csiplug/jobspec) and the packages that act on
// what it reads (driver, hooks, volumes, cluster) both need. Living here,
// the jobspec depends on core only, and whoever reads a jobspec (the CLI)
// loads none of the runtime packages. Nothing here does I/O or holds state.
export * from './access-modes';
export * from './attachment-modes';
export * from './capabilities';
export * from './cluster-options';
export * from './csi-plugin-config';
export * from './etcd-endpoint';
export * from './image-digest';
export * from './image-reference';
export * from './restart-policy';
export * from './stale-mount-policy';
export * from './task-event';
export * from './task-logs';
export * from './volume-request';
export * from './per-alloc-volume';
export * from './volume-spec';
export * from './task-own-dirs';
