// What an archive format's reader makes of one image in an archive: the
// documents to store from memory (an index the reference went through, the
// manifest, the config), the layer blobs to copy from the archive (each by
// its member name, digest and size, already checked by the first read),
// and the image as the store records it. Also the checks both formats
// share: a descriptor's blob is in the archive with its size and digest,
// and a JSON document's parse error said as the archive's.
import { parseDigest } from '../digest';
import { RegistryProtocolError, UnsupportedImageError } from '../errors';
import type { Descriptor, ImageConfig, LayerDescriptor } from '../manifest';
import type { ArchiveCatalog, ArchiveMember } from './archive-catalog';
import { ImageArchiveError } from './archive-errors';

export interface ArchiveBlob {
  readonly digest: string;
  readonly size: number;
  /** The member (links resolved) whose bytes the blob is. */
  readonly member: string;
}

export interface ArchiveImage {
  /** Small blobs stored from memory: an index on the way, the manifest, the config. */
  readonly documents: readonly { readonly digest: string; readonly bytes: Buffer }[];
  /** Layer blobs copied from the archive, in the manifest's order. */
  readonly layerBlobs: readonly ArchiveBlob[];
  /** The digest the reference resolved to (an index's, for a multi-platform image), as a registry's repo digest. */
  readonly repoDigest: string;
  readonly manifestDigest: string;
  readonly manifestMediaType: string;
  readonly configDigest: string;
  readonly config: ImageConfig;
  readonly layers: readonly LayerDescriptor[];
}

/** The member holding blob `desc` (blobs/<algorithm>/<hex>), its size and sha256 checked against the descriptor. */
export function blobMember(catalog: ArchiveCatalog, desc: Descriptor, what: string, name?: string): ArchiveMember {
  const d = parseDigest(desc.digest);
  const member = catalog.resolve(name ?? `blobs/${d.algorithm}/${d.hex}`, what);
  checkMember(catalog.archive, member, desc.digest, desc.size, what);
  return member;
}

/** Throws unless the member has this digest (sha256 only: the catalog hashes so) and size. */
export function checkMember(archive: string, member: ArchiveMember, digest: string, size: number, what: string): void {
  if (member.size !== size)
    throw new ImageArchiveError(archive, member.name, `${what} says ${size} bytes, the file in the archive is ${member.size} bytes`);
  if (!digest.startsWith('sha256:'))
    throw new ImageArchiveError(archive, member.name, `${what} names it by ${digest.split(':')[0]}`, {
      remedy:
        'csiplug supports only sha256 digests in an image archive: write the image with sha256 digests (skopeo copy, docker save do by default)',
    });
  if (member.digest !== digest)
    throw new ImageArchiveError(archive, member.name, `${what} says digest ${digest}, the file in the archive hashes to ${member.digest}`);
}

/** Runs a parse of an archive's JSON document; a parse error is said as the archive's, naming the member. */
export function parseArchiveDocument<T>(archive: string, member: string, parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    if (err instanceof RegistryProtocolError) {
      const detail = /sent a bad answer: (.*); is this address/s.exec(err.message)?.[1] ?? err.message;
      throw new ImageArchiveError(archive, member, detail, { cause: err });
    }
    if (err instanceof UnsupportedImageError) throw new ImageArchiveError(archive, member, err.message, { cause: err });
    if (err instanceof SyntaxError) throw new ImageArchiveError(archive, member, `is not valid JSON (${err.message})`, { cause: err });
    throw err;
  }
}
