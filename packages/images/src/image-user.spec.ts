// Docker user strings resolved against an image's passwd and group texts, by runc's rules.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { ImageUserError } from './unpack/errors';
import { parsePasswd, readImageUserFiles, resolveImageUser } from './image-user';

const PASSWD = [
  'root:x:0:0:root:/root:/bin/sh',
  'daemon:x:1:1::/usr/sbin:/usr/sbin/nologin',
  'csi:x:1000:1000::/home/csi:/bin/sh',
  'broken line',
  'nohome:x:1001:1001:::/bin/sh',
].join('\n');
const GROUP = ['root:x:0:', 'disk:x:6:csi', 'csi:x:1000:', 'storage:x:2000:csi,daemon'].join('\n');

describe('resolveImageUser', () => {
  it('is root with /root by default', () => {
    expect(resolveImageUser('', PASSWD, GROUP)).toEqual({ uid: 0, gid: 0, additionalGids: [], home: '/root', name: 'root' });
  });

  it('finds a name, its primary gid, home and supplementary groups', () => {
    expect(resolveImageUser('csi', PASSWD, GROUP)).toEqual({
      uid: 1000,
      gid: 1000,
      additionalGids: [6, 2000],
      home: '/home/csi',
      name: 'csi',
    });
  });

  it('finds a uid by number and takes an explicit group by name or number, without supplementary groups', () => {
    expect(resolveImageUser('1000:storage', PASSWD, GROUP)).toMatchObject({ uid: 1000, gid: 2000, additionalGids: [] });
    expect(resolveImageUser('csi:6', PASSWD, GROUP)).toMatchObject({ uid: 1000, gid: 6 });
  });

  it('uses a number the image does not define as it is, as docker run -u does', () => {
    expect(resolveImageUser('4242:4343', PASSWD, GROUP)).toEqual({ uid: 4242, gid: 4343, additionalGids: [], home: '/' });
    expect(resolveImageUser('4242', undefined, undefined)).toEqual({ uid: 4242, gid: 0, additionalGids: [], home: '/' });
  });

  it('gives "/" as home when passwd has none', () => {
    expect(resolveImageUser('nohome', PASSWD, GROUP).home).toBe('/');
  });

  it('refuses a name the image does not define, saying where it looked', () => {
    expect(() => resolveImageUser('nobody', PASSWD, GROUP)).toThrow(ImageUserError);
    expect(() => resolveImageUser('nobody', PASSWD, GROUP)).toThrow(/no user "nobody" in the image's \/etc\/passwd/);
    expect(() => resolveImageUser('csi:wheel', PASSWD, GROUP)).toThrow(/no group "wheel"/);
    expect(() => resolveImageUser('csi', undefined, GROUP)).toThrow(/has no \/etc\/passwd/);
    expect(() => resolveImageUser('a:b:c', PASSWD, GROUP)).toThrow(/"user", "uid"/);
  });

  it('skips malformed passwd lines', () => {
    expect(parsePasswd(PASSWD).map((u) => u.name)).toEqual(['root', 'daemon', 'csi', 'nohome']);
  });
});

describe('readImageUserFiles', () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(path.join(tmpdir(), 'image-user-'));
    mkdirSync(path.join(root, 'etc'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('reads the image files, never the host files a symlink points at', async () => {
    writeFileSync(path.join(root, 'etc/group'), GROUP);
    mkdirSync(path.join(root, 'real'));
    writeFileSync(path.join(root, 'real/passwd'), 'img:x:7:7::/img:/bin/sh\n');
    // An absolute link: on the host it would read the host's /etc/passwd; in the image it is /real/passwd.
    symlinkSync('/real/passwd', path.join(root, 'etc/passwd'));
    const files = await readImageUserFiles(root);
    expect(files.passwd).toBe('img:x:7:7::/img:/bin/sh\n');
    expect(files.group).toBe(GROUP);
  });

  it('gives undefined for files the image lacks', async () => {
    expect(await readImageUserFiles(root)).toEqual({});
  });
});
