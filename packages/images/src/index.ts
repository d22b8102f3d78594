// Public face of @csiplug/images.
export * from './digest';
export * from './errors';
export * from './manifest';
export * from './media-types';
export * from './platform';
export * from './puller';
export * from './reference';
export { parseWwwAuthenticate, resolveCredentials, type AuthChallenge, type AuthConfig, type Credentials } from './distribution/auth';
export { DEFAULT_RETRY, type RetryPolicy } from './distribution/retry';
export { DEFAULT_CERTS_DIR } from './distribution/trust';
export { BlobStore } from './store/blob-store';
export { IMAGE_INDEX_FILE, ImageIndex, type ImageRecord } from './store/image-index';
