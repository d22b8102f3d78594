import { ImageReferenceError } from './errors';
import { parseImageReference, parseRegistryReference, registryApiHost } from './reference';

const HEX = 'a'.repeat(64);

describe('parseRegistryReference: as Docker normalises', () => {
  it.each([
    ['busybox', 'docker.io', 'library/busybox', 'latest', undefined, 'docker.io/library/busybox:latest'],
    ['busybox:1.36', 'docker.io', 'library/busybox', '1.36', undefined, 'docker.io/library/busybox:1.36'],
    ['library/busybox', 'docker.io', 'library/busybox', 'latest', undefined, 'docker.io/library/busybox:latest'],
    ['index.docker.io/foo', 'docker.io', 'library/foo', 'latest', undefined, 'docker.io/library/foo:latest'],
    ['team/app:v1', 'docker.io', 'team/app', 'v1', undefined, 'docker.io/team/app:v1'],
    ['host:5000/a/b:tag', 'host:5000', 'a/b', 'tag', undefined, 'host:5000/a/b:tag'],
    ['localhost/app', 'localhost', 'app', 'latest', undefined, 'localhost/app:latest'],
    ['127.0.0.1:5000/app', '127.0.0.1:5000', 'app', 'latest', undefined, '127.0.0.1:5000/app:latest'],
    ['quay.io/ceph/ceph-csi:v3.9.0', 'quay.io', 'ceph/ceph-csi', 'v3.9.0', undefined, 'quay.io/ceph/ceph-csi:v3.9.0'],
    [`busybox@sha256:${HEX}`, 'docker.io', 'library/busybox', undefined, `sha256:${HEX}`, `docker.io/library/busybox@sha256:${HEX}`],
    [`r.io/a:1@sha256:${HEX}`, 'r.io', 'a', '1', `sha256:${HEX}`, `r.io/a:1@sha256:${HEX}`],
    ['[::1]:5000/a', '[::1]:5000', 'a', 'latest', undefined, '[::1]:5000/a:latest'],
    ['a__b/c-d.e_f', 'docker.io', 'a__b/c-d.e_f', 'latest', undefined, 'docker.io/a__b/c-d.e_f:latest'],
  ])('%s', (input, registry, repository, tag, digest, canonical) => {
    const ref = parseRegistryReference(input);
    expect(ref).toMatchObject({ kind: 'registry', registry, repository, canonical });
    expect(ref.tag).toBe(tag);
    expect(ref.digest).toBe(digest);
  });

  it('maps Docker Hub to its API host and leaves others alone', () => {
    expect(registryApiHost('docker.io')).toBe('registry-1.docker.io');
    expect(registryApiHost('host:5000')).toBe('host:5000');
  });
});

describe('parseRegistryReference: hostile or broken input', () => {
  it.each([
    ['', 'empty'],
    ['Busybox', 'lowercase'],
    ['host:5000/App', 'lowercase'],
    ['a b', 'whitespace'],
    ['a\nb', 'whitespace'],
    ['a\u0000b', 'control'],
    ['busybox:', 'tag ""'],
    ['busybox:-x', 'tag "-x"'],
    [`busybox:${'x'.repeat(129)}`, 'tag'],
    ['busybox:a/b', 'not a host'],
    ['a//b', 'empty path component'],
    ['a/', 'empty path component'],
    ['-a', 'path component "-a"'],
    ['a..b', 'path component'],
    ['../../etc/passwd', 'not a host'],
    ['host:99999/a', 'out of range'],
    ['ho_st.io/a', 'not a host'],
    ['https://r.io/a', 'URL scheme'],
    [`a@sha256:${HEX}@sha256:${HEX}`, 'more than one "@"'],
    ['a@sha256:abc', 'not a digest'],
    [`a@md5:${HEX}`, 'not a digest'],
    [HEX, 'image id'],
    [`r.io/${'a'.repeat(260)}`, 'longer than 255'],
    ['a'.repeat(2000), 'longer than 1024'],
    [':tag', 'empty'],
  ])('%j is refused (%s)', (input, reason) => {
    expect(() => parseRegistryReference(input)).toThrow(ImageReferenceError);
    expect(() => parseRegistryReference(input)).toThrow(reason);
  });
});

describe('parseImageReference: offline archives', () => {
  it('recognises oci-archive and docker-archive with an absolute path', () => {
    expect(parseImageReference('oci-archive:/srv/img.tar')).toEqual({
      kind: 'oci-archive',
      path: '/srv/img.tar',
      canonical: 'oci-archive:/srv/img.tar',
    });
    expect(parseImageReference('docker-archive:/srv/img.tar:app:v1')).toMatchObject({
      kind: 'docker-archive',
      path: '/srv/img.tar',
      inner: 'app:v1',
    });
    expect(parseImageReference('busybox').kind).toBe('registry');
  });

  it.each(['oci-archive:img.tar', 'oci-archive:', 'docker-archive:/a/../etc/x.tar', 'oci-archive:/a\u0000b', 'oci-archive:/a.tar:'])(
    'refuses %j',
    (input) => {
      expect(() => parseImageReference(input)).toThrow(ImageReferenceError);
    },
  );
});
