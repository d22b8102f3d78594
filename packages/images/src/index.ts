// @csiplug/images: OCI images for tasks. Pulls images over the OCI
// distribution API (or loads them from oci-archive/docker-archive files on
// the node) into a content-addressed store in the agent's data dir,
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
export * from './digest';
export * from './errors';
export * from './manifest';
export * from './media-types';
export * from './platform';
export * from './puller';
export { ArchiveLoader, type ArchiveLoadEvent, type ArchiveLoadOptions, type ArchiveLoaderOptions } from './archive/archive-loader';
export * from './archive/archive-errors';
export type { ArchivePathPolicy } from './archive/archive-catalog';
export * from './reference';
export { parseWwwAuthenticate, resolveCredentials, type AuthChallenge, type AuthConfig, type Credentials } from './distribution/auth';
export { DEFAULT_RETRY, type RetryPolicy } from './distribution/retry';
export { DEFAULT_CERTS_DIR } from './distribution/trust';
export { BlobStore } from './store/blob-store';
export { IMAGE_INDEX_FILE, ImageIndex, type ImageRecord } from './store/image-index';
export * from './store-lock';
export * from './task-images';
export * from './module';
