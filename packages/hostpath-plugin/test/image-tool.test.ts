// The image build's parts that need no engine: ldd's output read, the
// production closure of the real workspace (what goes in, what stays
// out), dev files, the command line and skopeo's arguments.
import * as path from 'node:path';
import { findRepoRoot } from '../image/build-image';
import { describeImage, epochFromEnv, parseImageArgs } from '../image/cli';
import { ImageBuildError } from '../image/errors';
import { isDevFile, isDevTopLevelEntry, productionClosure } from '../image/package-closure';
import { skopeoCopyArgs } from '../image/push-image';
import { parseLdd } from '@csiplug/images/testing';

describe('parseLdd', () => {
  it('lists each library and the loader, not the vDSO', () => {
    const out = [
      '\tlinux-vdso.so.1 (0x00007ffd)',
      '\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f6ea0a00000)',
      '\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f6ea081e000)',
      '\t/lib64/ld-linux-x86-64.so.2 (0x00007f6ea0d3a000)',
      '',
    ].join('\n');
    expect(parseLdd('/usr/bin/node', out)).toEqual([
      '/lib/x86_64-linux-gnu/libstdc++.so.6',
      '/lib/x86_64-linux-gnu/libc.so.6',
      '/lib64/ld-linux-x86-64.so.2',
    ]);
  });

  it('keeps both paths of a loader listed as `/path => /path`: the program names the first', () => {
    expect(parseLdd('/x', '\t/lib64/ld-linux-x86-64.so.2 => /usr/lib64/ld-linux-x86-64.so.2 (0x00007f)\n')).toEqual([
      '/lib64/ld-linux-x86-64.so.2',
      '/usr/lib64/ld-linux-x86-64.so.2',
    ]);
  });

  it('refuses a line it cannot read rather than leave a library out', () => {
    expect(() => parseLdd('/x', '\tlibfoo.so.1 => (0x00007f)\n')).toThrow(/cannot read the line/);
  });

  it('refuses a library ldd cannot find, naming it', () => {
    expect(() => parseLdd('/usr/bin/x', '\tlibgone.so.1 => not found\n')).toThrow(/libgone\.so\.1 => not found; install the library/);
  });
});

describe('the production closure of @csiplug/hostpath-plugin', () => {
  it('holds its dependencies, their dependencies and required peers, each once, and nothing only development needs', async () => {
    const root = await findRepoRoot(__dirname);
    const closure = await productionClosure(root, '@csiplug/hostpath-plugin');
    const names = closure.map((p) => p.name);
    expect(names[0]).toBe('@csiplug/hostpath-plugin');
    for (const wanted of [
      '@csiplug/core',
      '@csiplug/csi',
      '@grpc/grpc-js',
      '@grpc/proto-loader',
      'protobufjs',
      'pino',
      'reflect-metadata',
      'tsyringe',
    ])
      expect(names).toContain(wanted);
    // @csiplug/images is only a devDependency (the build's own), jest an optional peer of csi, typescript nobody's dependency.
    for (const unwanted of ['@csiplug/images', '@csiplug/agent', 'jest', '@jest/globals', 'typescript', 'nx'])
      expect(names).not.toContain(unwanted);
    expect(new Set(closure.map((p) => p.installPath)).size).toBe(closure.length);
    const core = closure.find((p) => p.name === '@csiplug/core')!;
    expect(core).toMatchObject({ workspace: true, installPath: path.join('node_modules', '@csiplug', 'core') });
    expect(closure.find((p) => p.name === 'pino')).toMatchObject({ workspace: false });
  });

  it('refuses a package that is not installed, saying what to run', async () => {
    const root = await findRepoRoot(__dirname);
    await expect(productionClosure(root, '@csiplug/not-a-package')).rejects.toThrow(/not installed .* run npm ci/);
  });
});

describe('dev files', () => {
  it.each([
    ['dist/index.d.ts', true],
    ['dist/index.d.ts.map', true],
    ['src/index.ts', true],
    ['dist/plugin.spec.js', true],
    ['README.md', true],
    ['LICENSE.md', false],
    ['dist/index.js', false],
    ['dist/index.js.map', false],
    ['dist/proto/csi.proto', false],
    ['build/Release/addon.node', false],
  ])('%s is a dev file: %s', (file, dev) => expect(isDevFile(file)).toBe(dev));

  it('leaves out dotfiles and test, bench, example and doc folders at a package top level', () => {
    expect(isDevTopLevelEntry('.github', true)).toBe(true);
    expect(isDevTopLevelEntry('.npmignore', false)).toBe(true);
    expect(isDevTopLevelEntry('test', true)).toBe(true);
    expect(isDevTopLevelEntry('benchmarks', true)).toBe(true);
    expect(isDevTopLevelEntry('lib', true)).toBe(false);
    expect(isDevTopLevelEntry('test', false)).toBe(false);
  });
});

describe('the image:hostpath command line', () => {
  it('reads --out, --push and skopeo passthrough, both as two words and with =', () => {
    expect(parseImageArgs(['--out', '/tmp/x', '--push=reg:5000/csi/hp:1', '--dest-cert-dir', '/certs', '--dest-creds', 'u:p'])).toEqual({
      help: false,
      out: '/tmp/x',
      push: 'reg:5000/csi/hp:1',
      destCertDir: '/certs',
      destCreds: 'u:p',
    });
    expect(parseImageArgs(['--help']).help).toBe(true);
  });

  it('refuses an unknown flag, a flag without a value, and skopeo flags without --push', () => {
    expect(() => parseImageArgs(['--tag', 'x'])).toThrow(ImageBuildError);
    expect(() => parseImageArgs(['--out'])).toThrow(/--out needs a value/);
    expect(() => parseImageArgs(['--dest-creds', 'u:p'])).toThrow(/go with --push/);
  });

  it('takes SOURCE_DATE_EPOCH as whole seconds', () => {
    expect(epochFromEnv(undefined)).toBe(0);
    expect(epochFromEnv('1700000000')).toBe(1_700_000_000);
    expect(() => epochFromEnv('yesterday')).toThrow(/SOURCE_DATE_EPOCH=yesterday/);
  });

  it('prints the layout, the tags, the manifest digest, the size and each layer', () => {
    const text = describeImage({
      layoutDir: '/out',
      tags: ['0.1.0', 'latest'],
      manifestDigest: 'sha256:abc',
      size: 43_500_000,
      entrypoint: ['/usr/bin/node', '/opt/csiplug/x.js'],
      layers: [{ digest: 'sha256:l1', size: 40_800_000, createdBy: 'base' }],
    });
    expect(text).toContain('layout:   /out');
    expect(text).toContain('oci:/out:0.1.0');
    expect(text).toContain('manifest: sha256:abc');
    expect(text).toContain('43.5 MB');
    expect(text).toContain('layer 1: sha256:l1 40.8 MB  base');
  });
});

describe('skopeo copy arguments', () => {
  it('copies the layout tag to docker://, with the cert dir and credentials when given', () => {
    expect(
      skopeoCopyArgs({ layoutDir: '/out', tag: '0.1.0', destination: 'reg:5000/csi/hp:0.1.0', destCertDir: '/c', destCreds: 'u:p' }),
    ).toEqual(['copy', '--quiet', '--dest-cert-dir', '/c', '--dest-creds', 'u:p', 'oci:/out:0.1.0', 'docker://reg:5000/csi/hp:0.1.0']);
    expect(skopeoCopyArgs({ layoutDir: '/out', tag: 'latest', destination: 'docker://reg/hp' })).toEqual([
      'copy',
      '--quiet',
      'oci:/out:latest',
      'docker://reg/hp',
    ]);
  });

  it('refuses a destination without a registry', () => {
    expect(() => skopeoCopyArgs({ layoutDir: '/out', tag: 'x', destination: 'hostpath' })).toThrow(/registry\/repository\[:tag\]/);
  });
});
