// Path cleaning and in-root resolution over real symlinks in a temp dir.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { UnsafeEntryError } from './errors';
import { cleanEntryPath, isWithin, resolveInRoot } from './secure-join';

describe('cleanEntryPath', () => {
  it.each([
    ['./etc/passwd', 'etc/passwd'],
    ['/etc/passwd', 'etc/passwd'],
    ['a//b/./c/', 'a/b/c'],
    ['a/b/../c', 'a/c'],
    ['./', ''],
    ['.', ''],
  ])('%s -> %s', (name, want) => expect(cleanEntryPath(name)).toBe(want));

  it.each(['../../etc/x', 'a/../../x', '/..', '..'])('refuses %s, which climbs above the root', (name) => {
    expect(() => cleanEntryPath(name)).toThrow(UnsafeEntryError);
    expect(() => cleanEntryPath(name)).toThrow(`"${name}"`);
  });
});

describe('resolveInRoot', () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'securejoin-'));
    mkdirSync(path.join(root, 'etc'));
    mkdirSync(path.join(root, 'usr/lib'), { recursive: true });
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('takes an absolute symlink target as relative to the root', async () => {
    symlinkSync('/', path.join(root, 'a'));
    expect(await resolveInRoot(root, 'a/etc/passwd', { followFinal: true })).toBe(path.join(root, 'etc/passwd'));
    symlinkSync('/etc', path.join(root, 'e'));
    expect(await resolveInRoot(root, 'e', { followFinal: true })).toBe(path.join(root, 'etc'));
    expect(await resolveInRoot(root, 'e', { followFinal: false })).toBe(path.join(root, 'e'));
  });

  it('clamps a chain of ".." symlinks at the root', async () => {
    symlinkSync('../../../..', path.join(root, 'usr/lib/up'));
    symlinkSync('usr/lib/up/../../../etc', path.join(root, 'chain'));
    expect(await resolveInRoot(root, 'usr/lib/up/etc/shadow', { followFinal: true })).toBe(path.join(root, 'etc/shadow'));
    expect(await resolveInRoot(root, 'chain/x', { followFinal: true })).toBe(path.join(root, 'etc/x'));
  });

  it('follows relative links from where they are', async () => {
    symlinkSync('lib', path.join(root, 'usr/l'));
    expect(await resolveInRoot(root, 'usr/l/x.so', { followFinal: true })).toBe(path.join(root, 'usr/lib/x.so'));
  });

  it('keeps checking after a missing component, so a ".." back into existing dirs cannot escape', async () => {
    symlinkSync('/', path.join(root, 'etc/root'));
    symlinkSync('missing/../etc/root/../../..', path.join(root, 'tricky'));
    const got = await resolveInRoot(root, 'tricky/host-file', { followFinal: true });
    expect(got).toBe(path.join(root, 'host-file'));
  });

  it('refuses a symlink loop', async () => {
    symlinkSync('b', path.join(root, 'a'));
    symlinkSync('a', path.join(root, 'b'));
    await expect(resolveInRoot(root, 'a/x', { followFinal: true, entryName: 'a/x' })).rejects.toThrow(/"a\/x".*loop/);
  });

  it('isWithin tells inside from outside', () => {
    expect(isWithin('/r', '/r')).toBe(true);
    expect(isWithin('/r', '/r/a')).toBe(true);
    expect(isWithin('/r', '/ra')).toBe(false);
    expect(isWithin('/r', '/')).toBe(false);
    expect(isWithin('/r', '/r/..data')).toBe(true);
    expect(isWithin('/r', '/r/..2024_01/x')).toBe(true);
    expect(isWithin('/r', '/..r')).toBe(false);
  });
});
