import { DigestFormatError, parseDigest } from './image-digest';
import { ImageReferenceError, parseImageReference } from './image-reference';

describe('parseImageReference (core: the parser the jobspec and @csiplug/images share)', () => {
  it('normalises a registry reference as Docker does', () => {
    expect(parseImageReference('quay.io/cephcsi/cephcsi:v3.9.0')).toEqual({
      kind: 'registry',
      registry: 'quay.io',
      repository: 'cephcsi/cephcsi',
      tag: 'v3.9.0',
      canonical: 'quay.io/cephcsi/cephcsi:v3.9.0',
    });
    expect(parseImageReference('busybox').canonical).toBe('docker.io/library/busybox:latest');
  });

  it('takes oci-archive:/abs/path.tar[:tag] and docker-archive:/abs/path.tar', () => {
    expect(parseImageReference('oci-archive:/srv/images/hostpath.tar:v1')).toEqual({
      kind: 'oci-archive',
      path: '/srv/images/hostpath.tar',
      inner: 'v1',
      canonical: 'oci-archive:/srv/images/hostpath.tar:v1',
    });
    expect(parseImageReference('docker-archive:/srv/plugin.tar')).toMatchObject({ kind: 'docker-archive', path: '/srv/plugin.tar' });
  });

  it.each([
    ['oci-archive:images/x.tar', 'absolute path'],
    ['docker-archive:/srv/../etc/x.tar', '".."'],
    ['oci-archive:/srv/a\u0000.tar', 'control characters'],
    ['Upper/Case', 'lowercase'],
  ])('refuses %j, saying why (%s), with the stable code', (input, why) => {
    let thrown: unknown;
    try {
      parseImageReference(input);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ImageReferenceError);
    expect((thrown as ImageReferenceError).code).toBe('EIMAGE_REFERENCE_INVALID');
    expect((thrown as ImageReferenceError).reason).toContain(why);
  });

  it('parses digests strictly', () => {
    expect(parseDigest(`sha256:${'0'.repeat(64)}`).algorithm).toBe('sha256');
    expect(() => parseDigest('sha256:abc')).toThrow(DigestFormatError);
  });
});
