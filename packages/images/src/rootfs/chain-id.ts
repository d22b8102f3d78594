// Chain ids as the OCI image spec defines them (image-spec config.md,
// "Layer ChainID"): ChainID(L0) = DiffID(L0), ChainID(Ln) =
// sha256(ChainID(Ln-1) + " " + DiffID(Ln)). A chain id names a layer
// together with everything below it, so two images that start with the same
// layers share those layers' unpacked dirs and part company where they
// differ.
import { createHash } from 'node:crypto';
import { LayerStoreError } from '../unpack/errors';

const SHA256_DIGEST = /^sha256:[0-9a-f]{64}$/;

/** Throws unless `digest` is "sha256:<64 lowercase hex>": a chain id becomes a directory name. */
export function assertSha256Digest(digest: string, what: string): void {
  if (!SHA256_DIGEST.test(digest)) {
    throw new LayerStoreError(
      `${what} "${digest}" is not a sha256 digest ("sha256:" and 64 lowercase hex digits); only sha256 diff ids are supported`,
    );
  }
}

/** The chain ids of a stack of diff ids, bottom layer first. */
export function chainIds(diffIds: readonly string[]): string[] {
  const out: string[] = [];
  for (const [i, diffId] of diffIds.entries()) {
    assertSha256Digest(diffId, `diff id of layer ${i}`);
    out.push(
      i === 0
        ? diffId
        : `sha256:${createHash('sha256')
            .update(`${out[i - 1]} ${diffId}`)
            .digest('hex')}`,
    );
  }
  return out;
}

/** The hex part of a sha256 digest: the layer's directory name. */
export function digestHex(digest: string): string {
  return digest.slice('sha256:'.length);
}
