// The tar reader against archives our tar writer builds (each header form,
// each kind of damage) and against GNU tar's own output.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync, linkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { buildTar, tarEntryBytes } from '../testing/tar-writer';
import { TarFormatError } from './errors';
import { readTar, type TarEntry } from './tar-reader';

interface Read extends Omit<TarEntry, 'body'> {
  text: string;
}

async function* chunked(buf: Buffer, size = 100): AsyncGenerator<Buffer> {
  for (let i = 0; i < buf.length; i += size) yield buf.subarray(i, i + size);
}

async function readAll(buf: Buffer, chunk = 100): Promise<Read[]> {
  const out: Read[] = [];
  for await (const e of readTar(chunked(buf, chunk))) {
    const parts: Buffer[] = [];
    for await (const c of e.body) parts.push(c);
    const { body: _body, ...rest } = e;
    out.push({ ...rest, text: Buffer.concat(parts).toString('utf8') });
  }
  return out;
}

async function failure(buf: Buffer): Promise<TarFormatError> {
  try {
    await readAll(buf);
  } catch (err) {
    if (err instanceof TarFormatError) return err;
    throw err;
  }
  throw new Error('the archive was read without an error');
}

describe('readTar', () => {
  it('reads ustar files, dirs, links and their metadata, in any chunking', async () => {
    const tar = buildTar([
      { name: 'etc/', type: 'directory', mode: 0o755, uid: 0, gid: 0 },
      { name: 'etc/hosts', body: 'localhost\n', mode: 0o4755, uid: 1000, gid: 100, mtime: 1_600_000_000, uname: 'bob', gname: 'users' },
      { name: 'etc/link', type: 'symlink', linkname: '../hosts' },
      { name: 'etc/hard', type: 'hardlink', linkname: 'etc/hosts' },
      { name: 'dev/null', type: 'char', devmajor: 1, devminor: 3, mode: 0o666 },
      { name: 'run/fifo', type: 'fifo' },
    ]);
    for (const chunk of [1, 7, 512, 100_000]) {
      const entries = await readAll(tar, chunk);
      expect(entries.map((e) => [e.name, e.type])).toEqual([
        ['etc/', 'directory'],
        ['etc/hosts', 'file'],
        ['etc/link', 'symlink'],
        ['etc/hard', 'hardlink'],
        ['dev/null', 'char'],
        ['run/fifo', 'fifo'],
      ]);
      expect(entries[1]).toMatchObject({
        text: 'localhost\n',
        mode: 0o4755,
        uid: 1000,
        gid: 100,
        mtime: 1_600_000_000,
        uname: 'bob',
        gname: 'users',
        size: 10,
      });
      expect(entries[2]!.linkname).toBe('../hosts');
      expect(entries[4]).toMatchObject({ devmajor: 1, devminor: 3 });
    }
  });

  it('skips bodies the caller does not read', async () => {
    const tar = buildTar([
      { name: 'a', body: 'x'.repeat(1500) },
      { name: 'b', body: 'second' },
    ]);
    const names: string[] = [];
    let second = '';
    for await (const e of readTar(chunked(tar, 333))) {
      names.push(e.name);
      if (e.name === 'b') for await (const c of e.body) second += c.toString();
    }
    expect(names).toEqual(['a', 'b']);
    expect(second).toBe('second');
  });

  it('skips the rest of a body the caller stopped reading part way', async () => {
    const tar = buildTar([
      { name: 'a', body: 'x'.repeat(5000) },
      { name: 'b', body: 'after' },
    ]);
    const seen: string[] = [];
    for await (const e of readTar(chunked(tar, 700))) {
      if (e.name === 'a') {
        for await (const c of e.body) {
          expect(c.length).toBeGreaterThan(0);
          break;
        }
      } else for await (const c of e.body) seen.push(c.toString());
    }
    expect(seen.join('')).toBe('after');
  });

  it('takes long names, link names, ids, times and xattrs from pax headers', async () => {
    const long = `${'d'.repeat(120)}/${'f'.repeat(150)}`;
    const tar = buildTar([
      {
        name: long,
        type: 'symlink',
        linkname: `/${'t'.repeat(200)}`,
        pax: {
          uid: '3000000',
          gid: '4000000',
          mtime: '1700000000.25',
          'SCHILY.xattr.user.note': 'hi',
          'SCHILY.xattr.security.capability': '\u0001',
        },
      },
    ]);
    const [e] = await readAll(tar);
    expect(e).toMatchObject({ name: long, linkname: `/${'t'.repeat(200)}`, uid: 3_000_000, gid: 4_000_000, mtime: 1_700_000_000.25 });
    expect(e!.xattrs.get('user.note')!.toString()).toBe('hi');
    expect([...e!.xattrs.keys()]).toEqual(['user.note', 'security.capability']);
  });

  it('ignores a pax global header (path, size, uid) as containerd and moby do; a local one covers the next entry only', async () => {
    const global = tarEntryBytes({ name: 'g', pax: { uid: '77', path: 'renamed', size: '3' } });
    // Turn the first header (the 'x' header our writer made) into a 'g' header, checksum fixed; the 'g' entry itself stays.
    global[156] = 'g'.charCodeAt(0);
    global.write('        ', 148, 'latin1');
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += global[i]!;
    global.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
    const tar = Buffer.concat([global, buildTar([{ name: 'b', pax: { gid: '5' }, body: 'hello' }, { name: 'c' }])]);
    const entries = await readAll(tar);
    expect(entries.map((e) => [e.name, e.uid, e.gid, e.size])).toEqual([
      ['PaxHeaders/g', 0, 0, 0], // the header's own name, not the global path
      ['b', 0, 5, 5],
      ['c', 0, 0, 0],
    ]);
  });

  it('refuses more than 64 xattrs or 64 KiB of xattrs on one entry', async () => {
    const many: Record<string, string> = {};
    for (let i = 0; i < 65; i++) many[`SCHILY.xattr.user.k${i}`] = 'v';
    await expect(readAll(buildTar([{ name: 'many', pax: many }]))).rejects.toThrow(/65 xattrs on one entry \(limit 64\)/);
    const big = { 'SCHILY.xattr.user.a': 'x'.repeat(40000), 'SCHILY.xattr.user.b': 'y'.repeat(40000) };
    await expect(readAll(buildTar([{ name: 'big', pax: big }]))).rejects.toThrow(/bytes of xattrs on one entry \(limit 65536\)/);
    const ok: Record<string, string> = {};
    for (let i = 0; i < 64; i++) ok[`SCHILY.xattr.user.k${i}`] = 'v';
    const [e] = await readAll(buildTar([{ name: 'ok', pax: ok }]));
    expect(e!.xattrs.size).toBe(64);
  });

  it('takes long names and link names from GNU L and K records', async () => {
    const long = `${'a'.repeat(90)}/${'b'.repeat(90)}`;
    const [e] = await readAll(buildTar([{ name: long, type: 'hardlink', linkname: `${'c'.repeat(130)}`, gnuLongNames: true }]));
    expect(e).toMatchObject({ name: long, linkname: 'c'.repeat(130), type: 'hardlink' });
  });

  it('refuses a header whose checksum does not add up, naming the entry', async () => {
    const err = await failure(buildTar([{ name: 'ok' }, { name: 'bad/file', body: 'x', badChecksum: true }]));
    expect(err.code).toBe('ELAYER_TAR');
    expect(err.message).toContain('"bad/file"');
    expect(err.message).toContain('checksum');
    expect(err.offset).toBe(512);
  });

  it('refuses an archive cut inside a body, naming the entry', async () => {
    const tar = buildTar([{ name: 'big', body: 'y'.repeat(3000) }], { endMarker: false });
    const err = await failure(tar.subarray(0, 512 + 1000));
    expect(err.message).toContain('"big"');
    expect(err.message).toContain('truncated');
  });

  it("refuses an archive cut inside a header or a padding; one ending cleanly at an entry boundary ends there, as Go's archive/tar reads it", async () => {
    const tar = buildTar([{ name: 'a', body: 'x' }, { name: 'b' }], { endMarker: false });
    expect((await failure(tar.subarray(0, 1024 + 100))).message).toContain('truncated inside a header');
    expect((await failure(tar.subarray(0, 512 + 100))).message).toContain('truncated in the padding');
    // umoci insert writes layers without the end marker, and with the last body unpadded: Docker and containerd take them.
    expect((await readAll(tar)).map((e) => e.name)).toEqual(['a', 'b']);
    expect((await readAll(tar.subarray(0, 512 + 1))).map((e) => e.name)).toEqual(['a']);
  });

  it('refuses an absurd declared size, from pax or the header', async () => {
    const viaPax = await failure(buildTar([{ name: 'huge', body: 'x', pax: { size: '99999999999999' } }]));
    expect(viaPax.message).toMatch(/"huge".*absurd/);
    const err = await failure(buildTar([{ name: 'meta', pax: { comment: 'x'.repeat(2 * 1024 * 1024) } }]));
    expect(err.message).toContain('absurd');
  });

  it('refuses a declared size larger than the archive as truncated', async () => {
    const err = await failure(buildTar([{ name: 'liar', body: 'abc', declaredSize: 5_000_000 }]));
    expect(err.message).toMatch(/"liar".*truncated/);
  });

  it('refuses malformed pax records and numeric fields', async () => {
    expect((await failure(buildTar([{ name: 'p', pax: { uid: 'x1' } }]))).message).toContain('pax uid="x1"');
    const bad = buildTar([{ name: 'm', mode: 0o644 }]);
    bad.write('9z9z9z9\0', 100, 'latin1'); // mode field, checksum now wrong too: the checksum is checked first
    expect((await failure(bad)).message).toContain('checksum');
  });

  it('refuses entry types layers do not use (GNU sparse)', async () => {
    const tar = buildTar([{ name: 'sparse' }]);
    tar[156] = 'S'.charCodeAt(0);
    tar.write('        ', 148, 'latin1');
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += tar[i]!;
    tar.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'latin1');
    expect((await failure(tar)).message).toMatch(/"sparse".*type "S"/);
  });

  describe('GNU tar archives', () => {
    let dir: string;
    beforeAll(() => {
      dir = mkdtempSync(path.join(tmpdir(), 'tar-reader-'));
      const src = path.join(dir, 'src');
      const deep = path.join(src, 'x'.repeat(60), 'y'.repeat(60));
      mkdirSync(deep, { recursive: true });
      writeFileSync(path.join(deep, 'z'.repeat(40)), 'deep file');
      writeFileSync(path.join(src, 'plain'), 'plain file');
      linkSync(path.join(src, 'plain'), path.join(src, 'hard'));
      symlinkSync(`../${'l'.repeat(120)}`, path.join(src, 'sym'));
    });
    afterAll(() => rmSync(dir, { recursive: true, force: true }));

    // ustar cannot hold the 123-byte link name at all, so that archive leaves the symlink out; its long path goes in the prefix field.
    it.each([
      ['gnu', []],
      ['pax', []],
      ['ustar', ['--exclude=./sym']],
    ])('reads a --format=%s archive', async (format, extra) => {
      const file = path.join(dir, `${format}.tar`);
      execFileSync('/usr/bin/tar', [`--format=${format}`, ...extra, '-C', path.join(dir, 'src'), '-cf', file, '.']);
      const entries = await readAll(readFileSync(file), 4096);
      const byName = new Map(entries.map((e) => [e.name.replace(/^\.\//, ''), e]));
      const deepName = `${'x'.repeat(60)}/${'y'.repeat(60)}/${'z'.repeat(40)}`;
      expect(byName.get(deepName)).toMatchObject({ type: 'file', text: 'deep file' });
      if (format !== 'ustar') expect(byName.get('sym')).toMatchObject({ type: 'symlink', linkname: `../${'l'.repeat(120)}` });
      const plainOrHard = [byName.get('plain')!, byName.get('hard')!];
      expect(plainOrHard.map((e) => e.type).sort()).toEqual(['file', 'hardlink']);
    });
  });
});
