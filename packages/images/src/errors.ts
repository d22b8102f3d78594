// Errors of @csiplug/images (the pull side): every failure a pull can meet
// derives from ImageError, with a stable code and a message that says what
// failed, where (registry, repository, blob, file) and what to do about it.
import { CsiplugError, errorMessage, formatDuration } from '@csiplug/core';

export class ImageError extends CsiplugError {}

// A reference or digest that does not parse: thrown by core's pure parsers
// (the jobspec checks a task's image with them), named here as before.
export { DigestFormatError, ImageReferenceError } from '@csiplug/core';

/** Content whose digest or size is not the one it was asked for by. */
export class DigestMismatchError extends ImageError {
  constructor(
    readonly what: string,
    readonly expected: string,
    readonly got: string,
  ) {
    super(
      'EIMAGE_DIGEST_MISMATCH',
      `${what}: expected ${expected}, got ${got}; the content was discarded. The registry's copy is corrupt or was changed under its digest: push the image again (or ask the registry's operator to), then pull again`,
    );
  }
}

/** The registry refused the credentials (or asked for some and none were found). */
export class RegistryAuthError extends ImageError {
  constructor(
    readonly registry: string,
    readonly credentialsSource: string,
    detail: string,
  ) {
    super(
      'EIMAGE_AUTH',
      `registry ${registry} refused the pull (${detail}); credentials used: ${credentialsSource}. Fix the task's auth { username, password } or the docker config file's auths entry for ${registry}`,
    );
  }
}

/** The repository, tag or digest is not in the registry. */
export class ImageNotFoundError extends ImageError {
  constructor(
    readonly registry: string,
    readonly what: string,
  ) {
    super(
      'EIMAGE_NOT_FOUND',
      `${what} not found in registry ${registry}; check the image name and tag (the registry answered 404), or push it first`,
    );
  }
}

/** The registry could not be reached or kept failing (network error, 5xx, 429) after every retry. */
export class RegistryUnreachableError extends ImageError {
  constructor(
    readonly registry: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(
      'EIMAGE_REGISTRY_UNREACHABLE',
      `registry ${registry} is unreachable: ${detail}; check the address, the network and that the registry is up, then pull again`,
      options,
    );
  }
}

/** A pull that ran past image_pull_timeout, or saw no bytes for pull_activity_timeout. */
export class ImagePullTimeoutError extends ImageError {
  constructor(
    readonly registry: string,
    readonly what: string,
    readonly timeoutMs: number,
    readonly kind: 'overall' | 'activity',
  ) {
    super(
      'EIMAGE_PULL_TIMEOUT',
      kind === 'overall'
        ? `pulling ${what} from ${registry} took longer than image_pull_timeout (${formatDuration(timeoutMs)}); raise image_pull_timeout for large images or check the registry`
        : `no bytes from registry ${registry} for ${formatDuration(timeoutMs)} while fetching ${what} (pull_activity_timeout); the registry or the network hangs, check them or raise pull_activity_timeout`,
    );
  }
}

/** TLS to the registry failed: an unknown CA, a name mismatch, an expired certificate. */
export class RegistryTlsError extends ImageError {
  constructor(
    readonly registry: string,
    readonly certsDir: string,
    cause: unknown,
  ) {
    super(
      'EIMAGE_TLS',
      `TLS to registry ${registry} failed: ${errorMessage(cause)}; if the registry uses a private CA, put that CA's certificate in ${certsDir}/${registry}/ca.crt (as Docker does) or add it to the system's CA store`,
      { cause },
    );
  }
}

/** A manifest or layer kind csiplug does not run (schema 1, foreign layers, unknown media types). */
export class UnsupportedImageError extends ImageError {
  constructor(
    readonly what: string,
    reason: string,
  ) {
    super('EIMAGE_UNSUPPORTED', `${what}: ${reason}`);
  }
}

/** The image index has no manifest for this node's platform. */
export class PlatformNotFoundError extends ImageError {
  constructor(
    readonly reference: string,
    readonly wanted: string,
    readonly available: readonly string[],
  ) {
    super(
      'EIMAGE_PLATFORM_NOT_FOUND',
      `image ${reference} has no manifest for this node's platform ${wanted} (it has: ${available.join(', ') || 'none'}); use an image built for ${wanted}`,
    );
  }
}

/** The registry answered something that is not the distribution API (bad JSON, a missing field). */
export class RegistryProtocolError extends ImageError {
  constructor(
    readonly registry: string,
    detail: string,
  ) {
    super('EIMAGE_REGISTRY_PROTOCOL', `registry ${registry} sent a bad answer: ${detail}; is this address an OCI/Docker registry?`);
  }
}

/** The image store's disk filled up while writing a blob; nothing was left behind. */
export class ImageStoreFullError extends ImageError {
  constructor(
    readonly digest: string,
    readonly dir: string,
    options?: { cause?: unknown },
  ) {
    super(
      'EIMAGE_STORE_FULL',
      `no space left while writing blob ${digest} into the image store ${dir}; the partial file was removed. Free space on that filesystem (or remove unused images), then pull again`,
      options,
    );
  }
}

/** The image store could not write or read a file for another reason (permissions, I/O). */
export class ImageStoreError extends ImageError {
  constructor(
    readonly path: string,
    action: string,
    cause: unknown,
  ) {
    super('EIMAGE_STORE', `image store: could not ${action} ${path}: ${errorMessage(cause)}; check the data dir's permissions and disk`, {
      cause,
    });
  }
}

/** The store's image index file is not what csiplug wrote. */
export class ImageIndexCorruptError extends ImageError {
  constructor(
    readonly file: string,
    reason: string,
  ) {
    super(
      'EIMAGE_INDEX_CORRUPT',
      `the image index ${file} is corrupt (${reason}); no blob was removed. Move the file aside and start again: images are then pulled (resolved) again and blobs already in the store are reused`,
    );
  }
}

/** A config file (docker config.json) that cannot be read or parsed. */
export class CredentialsConfigError extends ImageError {
  constructor(
    readonly file: string,
    reason: string,
  ) {
    super('EIMAGE_CREDENTIALS_CONFIG', `docker config ${file}: ${reason}`);
  }
}
