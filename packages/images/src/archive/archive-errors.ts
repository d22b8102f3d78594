// Errors of loading an image from an archive file (`oci-archive:`,
// `docker-archive:`): the file is missing or unreadable, or it is not the
// archive it claims to be — an entry that climbs out (`..`, an absolute name,
// a link pointing out), a manifest naming a file the archive lacks, content
// whose digest or size differs from what names it, a reference the archive
// does not hold. Each message names the archive, the file inside it and
// what to do; nothing of a refused archive is used.
import { ImageError } from '../errors';

/** The archive file itself cannot be used (missing, not a regular file, unreadable). */
export class ImageArchiveUnreadableError extends ImageError {
  constructor(
    readonly archive: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(
      'EIMAGE_ARCHIVE_UNREADABLE',
      `image archive ${archive} ${detail}; the archive is read on this node at the task's start: put it there, readable by the agent (written by skopeo copy or docker save), or fix the path in config.image`,
      options,
    );
  }
}

/** The archive's content is malformed or hostile; nothing of it was kept under a name. */
export class ImageArchiveError extends ImageError {
  constructor(
    readonly archive: string,
    /** The file inside the archive at fault, or "(the archive)". */
    readonly member: string,
    detail: string,
    /** `remedy`: what to do, when it is not writing the archive again (an archive gzipped as a whole, a digest algorithm csiplug does not check). */
    options?: { cause?: unknown; remedy?: string },
  ) {
    super(
      'EIMAGE_ARCHIVE',
      `image archive ${archive}: ${member}: ${detail}; ${options?.remedy ?? 'the archive is corrupt, hostile or not an image archive of this kind: write it again (skopeo copy, docker save) and start the task again'}`,
      options?.cause !== undefined ? { cause: options.cause } : undefined,
    );
  }
}

/**
 * The archive's path is not one this agent reads for a job: outside
 * plugin "docker" { config { allowed_host_paths } } (the agent reads it as
 * root, so a job naming any host file must not make it read that file).
 */
export class ImageArchiveRefusedError extends ImageError {
  constructor(
    readonly archive: string,
    /** The policy's sentence: which path, and what to add to the agent's config. */
    refusal: string,
  ) {
    super('EIMAGE_ARCHIVE_REFUSED', `image archive ${archive}: ${refusal}`);
  }
}

/** The archive holds no image the reference names (or several, and the reference names none). */
export class ImageArchiveReferenceError extends ImageError {
  constructor(
    readonly archive: string,
    detail: string,
  ) {
    super('EIMAGE_ARCHIVE_REFERENCE', `image archive ${archive}: ${detail}`);
  }
}
