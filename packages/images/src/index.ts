// @csiplug/images: OCI images for tasks. Pulls images over the OCI
// distribution API into a content-addressed store in the agent's data dir,
// unpacks their layers safely (each layer once, shared by every image that
// has it) and gives each task a root filesystem on top of them. Depends on
// core only; the runner asks it for a task's root before the driver starts
// the task on runc.
export * from './unpack/errors';
export * from './unpack/tar-reader';
export * from './unpack/secure-join';
export * from './unpack/layer-stream';
export * from './unpack/apply-layer';
export * from './rootfs/chain-id';
export * from './rootfs/layer-store';
export * from './rootfs/task-rootfs';
export { isMountPoint } from './rootfs/overlay';
export * from './image-config';
export * from './image-user';
