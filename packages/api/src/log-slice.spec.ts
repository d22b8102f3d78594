// Log slices: where a range falls, and reading just that range of a file.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { memoryLogSlice, openLogSlice, resolveLogRange } from './log-slice';

async function drain(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe('resolveLogRange', () => {
  it('counts from the start or back from the end, clamps to the file, and caps at the limit', () => {
    expect(resolveLogRange(100)).toEqual({ start: 0, length: 100 });
    expect(resolveLogRange(100, { offset: 10, limit: 5 })).toEqual({ start: 10, length: 5 });
    expect(resolveLogRange(100, { offset: 98, limit: 5 })).toEqual({ start: 98, length: 2 });
    expect(resolveLogRange(100, { offset: 500 })).toEqual({ start: 100, length: 0 });
    expect(resolveLogRange(100, { origin: 'end', offset: 10 })).toEqual({ start: 90, length: 10 });
    expect(resolveLogRange(100, { origin: 'end', offset: 10, limit: 3 })).toEqual({ start: 90, length: 3 });
    expect(resolveLogRange(100, { origin: 'end', offset: 500 })).toEqual({ start: 0, length: 100 });
    expect(resolveLogRange(100, { origin: 'end' })).toEqual({ start: 100, length: 0 });
    expect(resolveLogRange(0, { origin: 'end', offset: 10 })).toEqual({ start: 0, length: 0 });
  });
});

describe('openLogSlice', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-log-slice-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads only the range, with the size as it was when opened', async () => {
    const file = path.join(dir, 'stdout.log');
    fs.writeFileSync(file, '0123456789');
    const slice = await openLogSlice(file, { origin: 'end', offset: 4, limit: 3 });
    expect(slice).toMatchObject({ size: 10, start: 6, length: 3 });
    fs.appendFileSync(file, 'more');
    expect((await drain(slice.stream)).toString()).toBe('678');
    const rest = await openLogSlice(file, { offset: 8 });
    expect(rest).toMatchObject({ size: 14, start: 8, length: 6 });
    expect((await drain(rest.stream)).toString()).toBe('89more');
  });

  it('treats a missing file as an empty log, and an empty range as no bytes', async () => {
    const missing = await openLogSlice(path.join(dir, 'none.log'), { origin: 'end', offset: 10 });
    expect(missing).toMatchObject({ size: 0, start: 0, length: 0 });
    expect(await drain(missing.stream)).toEqual(Buffer.alloc(0));
    const file = path.join(dir, 'stdout.log');
    fs.writeFileSync(file, 'abc');
    const past = await openLogSlice(file, { offset: 7 });
    expect(past).toMatchObject({ size: 3, start: 3, length: 0 });
    expect(await drain(past.stream)).toEqual(Buffer.alloc(0));
  });

  it('closes the file when the reader stops early', async () => {
    const file = path.join(dir, 'stdout.log');
    fs.writeFileSync(file, Buffer.alloc(1024 * 1024, 'z'));
    const slice = await openLogSlice(file);
    const closed = new Promise((resolve) => slice.stream.once('close', resolve));
    slice.stream.destroy();
    await closed;
    const fds = fs.readdirSync('/proc/self/fd').map((fd) => {
      try {
        return fs.readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return '';
      }
    });
    expect(fds).not.toContain(file);
  });

  it('tells which file it read, so a follower tells a rotated log (a new file) from one truncated in place', async () => {
    const file = path.join(dir, 'stdout.log');
    fs.writeFileSync(file, 'one\n');
    const first = await openLogSlice(file);
    first.stream.destroy();
    expect(first.fileId).toMatch(/^\d+:\d+$/);
    // Appended to, or truncated in place (max_files = 1): the same file.
    fs.appendFileSync(file, 'two\n');
    const appended = await openLogSlice(file, { offset: 8 });
    expect(appended.fileId).toBe(first.fileId);
    fs.truncateSync(file, 0);
    expect((await openLogSlice(file, { offset: 8 })).fileId).toBe(first.fileId);
    // Rotated as RotatingLog does (renamed to .1, a new file in its place): another file, and .1 is the old one.
    fs.writeFileSync(file, 'one\ntwo\n');
    fs.renameSync(file, `${file}.1`);
    fs.writeFileSync(file, 'three\n');
    const rotated = await openLogSlice(file);
    rotated.stream.destroy();
    expect(rotated.fileId).not.toBe(first.fileId);
    const old = await openLogSlice(`${file}.1`, { offset: 4 });
    expect(old.fileId).toBe(first.fileId);
    expect((await drain(old.stream)).toString()).toBe('two\n');
  });

  it('has an in-memory twin that slices the same way', async () => {
    const slice = memoryLogSlice(Buffer.from('0123456789'), { origin: 'end', offset: 4, limit: 3 });
    expect(slice).toMatchObject({ size: 10, start: 6, length: 3 });
    expect((await drain(slice.stream)).toString()).toBe('678');
  });
});

describe('openLogSlice refuses what a task may have planted', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-logslice-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a symlink in place of the log, without following it', async () => {
    fs.writeFileSync(path.join(dir, 'secret'), 'root only');
    fs.symlinkSync(path.join(dir, 'secret'), path.join(dir, 'stdout.log'));
    await expect(openLogSlice(path.join(dir, 'stdout.log'))).rejects.toMatchObject({ code: 'ELOG_NOT_FILE' });
  });

  it('a FIFO in place of the log, without blocking on it', async () => {
    execFileSync('mkfifo', [path.join(dir, 'stderr.log')]);
    await expect(openLogSlice(path.join(dir, 'stderr.log'))).rejects.toMatchObject({ code: 'ELOG_NOT_FILE' });
  });
});
