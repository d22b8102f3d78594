// Content digests as the OCI image spec writes them (`sha256:<hex>`,
// `sha512:<hex>`): strict parsing, and a verifier fed chunk by chunk while
// content streams, which checks both the digest and the exact size.
import { createHash, type Hash } from 'node:crypto';
import { DigestFormatError, DigestMismatchError } from './errors';

export type DigestAlgorithm = 'sha256' | 'sha512';

const HEX_LENGTH: Record<DigestAlgorithm, number> = { sha256: 64, sha512: 128 };

export interface Digest {
  readonly algorithm: DigestAlgorithm;
  /** Lowercase hex, the exact length of the algorithm. */
  readonly hex: string;
  /** `algorithm:hex`. */
  readonly value: string;
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

/** The sha256 digest of bytes held in memory (manifests, configs). */
export function digestOf(bytes: Uint8Array, algorithm: DigestAlgorithm = 'sha256'): string {
  return `${algorithm}:${createHash(algorithm).update(bytes).digest('hex')}`;
}

/**
 * Checks streamed content against an expected digest and size. `update`
 * throws as soon as more bytes than expected arrive (so a hostile server
 * cannot fill the disk past the descriptor's size); `verify` throws when
 * the total is short or the digest differs.
 */
export class DigestVerifier {
  private readonly hash: Hash;
  private received = 0;
  private computed: string | undefined;

  constructor(
    readonly expected: Digest,
    readonly expectedSize: number,
    /** What the content is, for the error ("blob sha256:… of docker.io/library/busybox"). */
    readonly what: string,
  ) {
    if (!Number.isSafeInteger(expectedSize) || expectedSize < 0) {
      throw new DigestMismatchError(what, 'a size that is a non-negative integer', String(expectedSize));
    }
    this.hash = createHash(expected.algorithm);
  }

  get bytesReceived(): number {
    return this.received;
  }

  update(chunk: Uint8Array): void {
    this.received += chunk.length;
    if (this.received > this.expectedSize) {
      throw new DigestMismatchError(`size of ${this.what}`, `${this.expectedSize} bytes`, `more (${this.received} bytes so far)`);
    }
    this.hash.update(chunk);
  }

  verify(): void {
    if (this.received !== this.expectedSize) {
      throw new DigestMismatchError(`size of ${this.what}`, `${this.expectedSize} bytes`, `${this.received} bytes`);
    }
    this.computed ??= `${this.expected.algorithm}:${this.hash.digest('hex')}`;
    const got = this.computed;
    if (got !== this.expected.value) throw new DigestMismatchError(`digest of ${this.what}`, this.expected.value, got);
  }
}
