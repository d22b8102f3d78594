// Chain ids against sha256sum(1)'s answer for the OCI definition, and the
// digest check that keeps a diff id from naming a path outside the store.
import { execFileSync } from 'node:child_process';
import { LayerStoreError } from '../unpack/errors';
import { assertSha256Digest, chainIds, digestHex } from './chain-id';

const A = `sha256:${'a'.repeat(64)}`;
const B = `sha256:${'b'.repeat(64)}`;
const C = `sha256:${'c'.repeat(64)}`;

function sha256sum(text: string): string {
  return `sha256:${execFileSync('/usr/bin/sha256sum', { input: text }).toString().split(' ')[0]}`;
}

describe('chainIds', () => {
  it('is the diff id for the bottom layer and sha256(parent + " " + diff id) above it', () => {
    const ab = sha256sum(`${A} ${B}`);
    expect(chainIds([A, B, C])).toEqual([A, ab, sha256sum(`${ab} ${C}`)]);
  });

  it('shares a prefix between stacks that share their bottom layers, and only that', () => {
    const [x0, x1] = chainIds([A, B]);
    const [y0, y1] = chainIds([A, C]);
    expect(x0).toBe(y0);
    expect(x1).not.toBe(y1);
    expect(chainIds([B, A])[1]).not.toBe(x1);
  });

  it.each(['sha256:../../etc', `sha512:${'a'.repeat(128)}`, `sha256:${'A'.repeat(64)}`, `sha256:${'a'.repeat(63)}`, ''])(
    'refuses diff id %j',
    (bad) => {
      expect(() => chainIds([A, bad])).toThrow(LayerStoreError);
      expect(() => assertSha256Digest(bad, 'x')).toThrow(/not a sha256 digest/);
    },
  );

  it('names a layer dir by the hex alone', () => {
    expect(digestHex(A)).toBe('a'.repeat(64));
  });
});
