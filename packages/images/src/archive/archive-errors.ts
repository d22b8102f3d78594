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
    options?: { cause?: unknown },
  ) {
    super(
      'EIMAGE_ARCHIVE',
      `image archive ${archive}: ${member}: ${detail}; the archive is corrupt, hostile or not an image archive of this kind: write it again (skopeo copy, docker save) and start the task again`,
      options,
    );
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
