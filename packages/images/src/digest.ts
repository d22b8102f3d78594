// Content digests as the OCI image spec writes them (`sha256:<hex>`,
// `sha512:<hex>`): the strict parsing (core's, shared with the jobspec's
// image check) and a verifier fed chunk by chunk while content streams,
// which checks both the digest and the exact size.
import { type Digest, type DigestAlgorithm } from '@csiplug/core';
import { createHash, type Hash } from 'node:crypto';
import { DigestMismatchError } from './errors';

export { isDigest, parseDigest, type Digest, type DigestAlgorithm } from '@csiplug/core';

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
