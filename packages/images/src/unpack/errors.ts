// Errors of the unpack and rootfs side of @csiplug/images: a layer that is
// not a well-formed tar, an entry that tries to leave the root, a layer whose
// content is not what the image config says (diff id), a store or mount that
// cannot be used, an image user that the image does not define. Each has a
// stable `code` and says which layer or entry, and what to do.
import { CsiplugError, errorMessage } from '@csiplug/core';

export class UnpackError extends CsiplugError {}

/** The layer is not a tar we can read: bad checksum, truncated, an absurd size, an unknown entry type. */
export class TarFormatError extends UnpackError {
  constructor(
    readonly entryName: string,
    readonly offset: number,
    detail: string,
  ) {
    super(
      'ELAYER_TAR',
      `layer tar is malformed at entry "${entryName}" (byte ${offset} of the uncompressed tar): ${detail}; the layer blob is corrupt or not a tar: delete it from the blob store and pull the image again`,
    );
  }
}

/** An entry that would write, link or delete outside the layer's root. */
export class UnsafeEntryError extends UnpackError {
  constructor(
    readonly entryName: string,
    detail: string,
  ) {
    super(
      'ELAYER_UNSAFE_ENTRY',
      `layer entry "${entryName}" refused: ${detail}; the image is malformed or hostile, nothing of this layer was kept: use another image`,
    );
  }
}

/** The uncompressed layer does not hash to the diff id the image config lists. */
export class DiffIdMismatchError extends UnpackError {
  constructor(
    readonly blobPath: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(
      'ELAYER_DIFF_ID_MISMATCH',
      `layer ${blobPath} uncompresses to ${actual}, but the image config's rootfs.diff_ids says ${expected}; nothing of this layer was kept: the blob or the image config is corrupt, pull the image again`,
    );
  }
}

/** A media type that is not a layer we can unpack, or a stream that fails to decompress. */
export class LayerCompressionError extends UnpackError {
  constructor(
    readonly blobPath: string,
    detail: string,
    cause?: unknown,
  ) {
    super(
      'ELAYER_COMPRESSION',
      `cannot decompress layer ${blobPath}: ${detail}${cause !== undefined ? ` (${errorMessage(cause)})` : ''}`,
      cause !== undefined ? { cause } : undefined,
    );
  }
}

/** Writing an entry failed on the host (disk full, permissions…). */
export class LayerWriteError extends UnpackError {
  constructor(
    readonly entryName: string,
    readonly hostPath: string,
    cause: unknown,
  ) {
    super(
      'ELAYER_WRITE',
      `could not write layer entry "${entryName}" to ${hostPath}: ${errorMessage(cause)}; nothing of this layer was kept: free space or fix the store dir's permissions and retry`,
      { cause },
    );
  }
}

/** The layer store cannot be opened or used as asked. */
export class LayerStoreError extends UnpackError {
  constructor(message: string, cause?: unknown) {
    super('ELAYER_STORE', message, cause !== undefined ? { cause } : undefined);
  }
}

/** A mount or unmount (overlay, task rootfs) failed. */
export class RootfsMountError extends UnpackError {
  constructor(
    readonly target: string,
    detail: string,
    cause?: unknown,
  ) {
    super(
      'EROOTFS_MOUNT',
      `mount at ${target} failed: ${detail}${cause !== undefined ? `: ${errorMessage(cause)}` : ''}`,
      cause !== undefined ? { cause } : undefined,
    );
  }
}

/** The image config plus the task's config give no runnable process. */
export class ImageProcessError extends UnpackError {
  constructor(message: string) {
    super('EIMAGE_PROCESS', message);
  }
}

/** The image's user or group is not defined in the image's /etc/passwd or /etc/group. */
export class ImageUserError extends UnpackError {
  constructor(
    readonly user: string,
    detail: string,
  ) {
    super(
      'EIMAGE_USER',
      `user "${user}" cannot run in this image: ${detail}; give a user the image defines (its /etc/passwd and /etc/group), or a numeric uid[:gid]`,
    );
  }
}
