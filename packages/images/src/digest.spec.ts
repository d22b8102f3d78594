import { createHash } from 'node:crypto';
import { DigestVerifier, digestOf, isDigest, parseDigest } from './digest';
import { DigestFormatError, DigestMismatchError } from './errors';

const hexOf = (s: string, alg = 'sha256') => createHash(alg).update(s).digest('hex');

describe('parseDigest', () => {
  it('accepts sha256 and sha512 with lowercase hex of the right length', () => {
    const d = parseDigest(`sha256:${hexOf('a')}`);
    expect(d).toEqual({ algorithm: 'sha256', hex: hexOf('a'), value: `sha256:${hexOf('a')}` });
    expect(parseDigest(`sha512:${hexOf('a', 'sha512')}`).algorithm).toBe('sha512');
  });

  it.each([
    ['', 'no "algorithm:" prefix'],
    ['sha256', 'no "algorithm:" prefix'],
    [`md5:${'a'.repeat(32)}`, 'not supported'],
    [`sha256:${'a'.repeat(63)}`, 'takes 64 hex digits'],
    [`sha256:${'A'.repeat(64)}`, 'lowercase hex'],
    [`sha256:${'g'.repeat(64)}`, 'lowercase hex'],
    [`sha256:../../${'a'.repeat(58)}`, 'lowercase hex'],
    [`sha512:${'a'.repeat(64)}`, 'takes 128 hex digits'],
    ['x'.repeat(10_000), 'too long'],
  ])('refuses %j (%s)', (input, reason) => {
    expect(() => parseDigest(input)).toThrow(DigestFormatError);
    expect(() => parseDigest(input)).toThrow(reason);
    expect(isDigest(input)).toBe(false);
  });
});

describe('DigestVerifier', () => {
  const content = Buffer.from('hello layer');
  const digest = parseDigest(digestOf(content));

  it('passes content fed in chunks when digest and size match', () => {
    const v = new DigestVerifier(digest, content.length, 'blob x');
    v.update(content.subarray(0, 3));
    v.update(content.subarray(3));
    expect(() => v.verify()).not.toThrow();
    expect(v.bytesReceived).toBe(content.length);
  });

  it('refuses a different digest, naming expected and got', () => {
    const v = new DigestVerifier(digest, content.length, 'blob x');
    v.update(Buffer.from('hello LAYER'));
    expect(() => v.verify()).toThrow(DigestMismatchError);
    expect(() => v.verify()).toThrow(digest.value);
  });

  it('refuses more bytes than the size as soon as they arrive', () => {
    const v = new DigestVerifier(digest, 4, 'blob x');
    expect(() => v.update(content)).toThrow(/expected 4 bytes/);
  });

  it('refuses short content', () => {
    const v = new DigestVerifier(digest, content.length, 'blob x');
    v.update(content.subarray(0, 2));
    expect(() => v.verify()).toThrow(/got 2 bytes/);
  });
});
