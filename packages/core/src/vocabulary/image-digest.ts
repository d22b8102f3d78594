// Content digests as the OCI image spec writes them (`sha256:<hex>`,
// `sha512:<hex>`), strictly parsed. Pure: an image reference pins one
// (image-reference.ts), and @csiplug/images checks every blob against one.
import { CsiplugError } from '../errors';

export type DigestAlgorithm = 'sha256' | 'sha512';

const HEX_LENGTH: Record<DigestAlgorithm, number> = { sha256: 64, sha512: 128 };

export interface Digest {
  readonly algorithm: DigestAlgorithm;
  /** Lowercase hex, the exact length of the algorithm. */
  readonly hex: string;
  /** `algorithm:hex`. */
  readonly value: string;
}

/** A digest string that is not `<algorithm>:<hex>` of a supported algorithm. */
export class DigestFormatError extends CsiplugError {
  constructor(
    readonly digest: string,
    reason: string,
  ) {
    super(
      'EIMAGE_DIGEST_INVALID',
      `invalid digest ${JSON.stringify(digest.length > 200 ? `${digest.slice(0, 200)}…` : digest)}: ${reason}; a digest is sha256:<64 lowercase hex> or sha512:<128 lowercase hex>`,
    );
  }
}

/** Parses `sha256:<64 hex>` / `sha512:<128 hex>`; anything else throws DigestFormatError. */
export function parseDigest(input: string): Digest {
  if (typeof input !== 'string') throw new DigestFormatError(String(input), 'not a string');
  if (input.length > 7 + 128 + 1) throw new DigestFormatError(input, 'too long');
  const colon = input.indexOf(':');
  if (colon < 0) throw new DigestFormatError(input, 'no "algorithm:" prefix');
  const algorithm = input.slice(0, colon);
  const hex = input.slice(colon + 1);
  if (algorithm !== 'sha256' && algorithm !== 'sha512') {
    throw new DigestFormatError(input, `algorithm ${JSON.stringify(algorithm)} is not supported (sha256 or sha512)`);
  }
  if (hex.length !== HEX_LENGTH[algorithm]) {
    throw new DigestFormatError(input, `${algorithm} takes ${HEX_LENGTH[algorithm]} hex digits, got ${hex.length}`);
  }
  if (!/^[0-9a-f]+$/.test(hex)) throw new DigestFormatError(input, 'the hex part must be lowercase hex digits only');
  return { algorithm, hex, value: `${algorithm}:${hex}` };
}

/** True when `input` parses as a digest. */
export function isDigest(input: string): boolean {
  try {
    parseDigest(input);
    return true;
  } catch {
    return false;
  }
}
