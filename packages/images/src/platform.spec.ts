import { PlatformNotFoundError } from './errors';
import type { Descriptor } from './manifest';
import { formatPlatform, nodePlatform, platformFor, selectPlatformManifest } from './platform';

const d = (n: number, architecture: string, variant?: string, os = 'linux'): Descriptor => ({
  mediaType: 'application/vnd.oci.image.manifest.v1+json',
  digest: `sha256:${String(n).repeat(64).slice(0, 64)}`,
  size: 100,
  platform: { os, architecture, ...(variant ? { variant } : {}) },
});

describe('platformFor (process.arch → GOARCH)', () => {
  it.each([
    ['x64', 'linux/amd64'],
    ['arm64', 'linux/arm64/v8'],
    ['arm', 'linux/arm/v7'],
    ['ia32', 'linux/386'],
    ['ppc64', 'linux/ppc64le'],
    ['s390x', 'linux/s390x'],
    ['riscv64', 'linux/riscv64'],
  ])('%s → %s', (arch, expected) => {
    expect(formatPlatform(platformFor(arch, { endian: 'LE' }))).toBe(expected);
  });

  it('reads this node', () => {
    expect(nodePlatform().os).toBe('linux');
  });
});

describe('selectPlatformManifest', () => {
  const index = [d(1, 'amd64'), d(2, 'arm64', 'v8'), d(3, 'arm', 'v6'), d(4, 'arm', 'v7'), d(5, 'unknown', undefined, 'unknown')];

  it('takes the node architecture', () => {
    expect(selectPlatformManifest(index, platformFor('x64'), 'r').digest).toBe(d(1, 'amd64').digest);
    expect(selectPlatformManifest(index, platformFor('arm64'), 'r').digest).toBe(d(2, 'arm64').digest);
    expect(selectPlatformManifest(index, platformFor('arm', { armVersion: 7 }), 'r').digest).toBe(d(4, 'arm').digest);
  });

  it('matches arm64 without a variant to a v8 node, and falls back to an older arm variant', () => {
    expect(selectPlatformManifest([d(7, 'arm64')], platformFor('arm64'), 'r').digest).toBe(d(7, 'arm64').digest);
    expect(selectPlatformManifest([d(3, 'arm', 'v6'), d(8, 'arm', 'v5')], platformFor('arm', { armVersion: 7 }), 'r').digest).toBe(
      d(3, 'arm').digest,
    );
  });

  it('never takes another os, and says what there is when nothing fits', () => {
    const windowsOnly = [d(1, 'amd64', undefined, 'windows')];
    expect(() => selectPlatformManifest(windowsOnly, platformFor('x64'), 'r.io/a:1')).toThrow(PlatformNotFoundError);
    expect(() => selectPlatformManifest(windowsOnly, platformFor('x64'), 'r.io/a:1')).toThrow('windows/amd64');
  });
});
