// A strict, streaming tar reader of our own for image layers: ustar headers,
// pax extended headers (path, linkpath, size, uid, gid, mtime, uname, gname,
// SCHILY.xattr.*; global headers are read past and ignored, as containerd and
// moby do, so a layer unpacks here as in Docker) and GNU long names and long link names
// ('L' / 'K'). Layers are hostile input, so anything odd is an error naming
// the entry: a header checksum that does not add up, an archive that ends
// inside an entry, a size that is not a number or absurdly large, an entry
// type we do not know. The reader never buffers a file's body: each entry's
// body is an async iterable the caller reads (or not: the reader skips it).
import { TarFormatError } from './errors';

export const BLOCK_SIZE = 512;

export type TarEntryType = 'file' | 'hardlink' | 'symlink' | 'char' | 'block' | 'directory' | 'fifo';

export interface TarEntry {
  /** The path as written in the archive (pax / GNU long name applied), not cleaned. */
  readonly name: string;
  readonly type: TarEntryType;
  /** Permission bits including setuid/setgid/sticky (mode & 0o7777). */
  readonly mode: number;
  readonly uid: number;
  readonly gid: number;
  readonly uname: string;
  readonly gname: string;
  /** Seconds since the epoch, fractions from pax kept. */
  readonly mtime: number;
  /** Bytes of body (0 for everything but files). */
  readonly size: number;
  /** Target of a symlink or hard link. */
  readonly linkname: string;
  readonly devmajor: number;
  readonly devminor: number;
  /** Extended attributes from pax SCHILY.xattr.* records, values as raw bytes. */
  readonly xattrs: ReadonlyMap<string, Buffer>;
  /** Byte offset of this entry's header in the uncompressed tar. */
  readonly offset: number;
  /** The body; read it fully or not at all before asking for the next entry. */
  readonly body: AsyncIterable<Buffer>;
}

export interface TarReaderOptions {
  /** Largest body a file entry may declare; larger is refused as absurd. Default 64 GiB. */
  readonly maxEntryBytes?: number;
  /** Largest pax or GNU long-name record. Default 1 MiB. */
  readonly maxMetaBytes?: number;
}

const DEFAULT_MAX_ENTRY_BYTES = 64 * 1024 ** 3;
const DEFAULT_MAX_META_BYTES = 1024 * 1024;
/** At most this many xattrs on one entry, and this many bytes of xattr names and values in all: beyond is a hostile layer. */
export const MAX_XATTRS_PER_ENTRY = 64;
export const MAX_XATTR_BYTES_PER_ENTRY = 64 * 1024;

/** Pulls exact byte counts out of an async stream of chunks. */
class ByteSource {
  private readonly it: AsyncIterator<Buffer>;
  private pending: Buffer = Buffer.alloc(0);
  private ended = false;
  /** Bytes handed out so far. */
  position = 0;

  constructor(source: AsyncIterable<Buffer | Uint8Array | string>) {
    const inner = source[Symbol.asyncIterator]();
    this.it = {
      next: async () => {
        const r = await inner.next();
        if (r.done) return r;
        const v = r.value;
        return { done: false, value: typeof v === 'string' ? Buffer.from(v) : Buffer.isBuffer(v) ? v : Buffer.from(v) };
      },
    };
  }

  private async fill(): Promise<boolean> {
    if (this.ended) return false;
    const r = await this.it.next();
    if (r.done) {
      this.ended = true;
      return false;
    }
    this.pending = this.pending.length ? Buffer.concat([this.pending, r.value]) : r.value;
    return true;
  }

  /** Exactly n bytes, or fewer only when the stream ends first. */
  async read(n: number): Promise<Buffer> {
    while (this.pending.length < n) if (!(await this.fill())) break;
    const take = Math.min(n, this.pending.length);
    const out = this.pending.subarray(0, take);
    this.pending = this.pending.subarray(take);
    this.position += take;
    return out;
  }

  /** Up to n bytes in the chunks they arrive in; stops early only at the end of the stream. */
  async *chunks(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (!this.pending.length && !(await this.fill())) return;
      const take = Math.min(left, this.pending.length);
      const out = this.pending.subarray(0, take);
      this.pending = this.pending.subarray(take);
      this.position += take;
      left -= take;
      yield out;
    }
  }
}

/** A NUL-terminated string field. */
function cString(buf: Buffer, start: number, len: number): string {
  const field = buf.subarray(start, start + len);
  const nul = field.indexOf(0);
  return field.subarray(0, nul < 0 ? field.length : nul).toString('utf8');
}

/**
 * A numeric header field: octal digits (space or NUL padded), or GNU's
 * base-256 form when the first byte's high bit is set (sizes over 8 GiB,
 * big uids). Undefined when the field is not a number.
 */
export function parseNumericField(buf: Buffer, start: number, len: number): number | undefined {
  const field = buf.subarray(start, start + len);
  if (field[0]! & 0x80) {
    if (field[0]! & 0x40) return undefined; // negative base-256: never valid here
    let v = field[0]! & 0x3f;
    for (let i = 1; i < field.length; i++) {
      v = v * 256 + field[i]!;
      if (v > Number.MAX_SAFE_INTEGER) return undefined;
    }
    return v;
  }
  const text = field.toString('latin1').replace(/\0.*$/s, '').trim();
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) return undefined;
  const v = parseInt(text, 8);
  return Number.isSafeInteger(v) ? v : undefined;
}

/** Whether the header's stored checksum matches (unsigned sum as POSIX says; signed as some old tars wrote). */
function checksumMatches(block: Buffer, stored: number): boolean {
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK_SIZE; i++) {
    const b = i >= 148 && i < 156 ? 0x20 : block[i]!;
    unsigned += b;
    signed += b > 127 ? b - 256 : b;
  }
  return stored === unsigned || stored === signed;
}

function isZeroBlock(block: Buffer): boolean {
  for (let i = 0; i < block.length; i++) if (block[i] !== 0) return false;
  return true;
}

/** Records of a pax extended header ("<len> <key>=<value>\n"…), strictly. */
export function parsePaxRecords(data: Buffer, entryName: string, offset: number): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  let pos = 0;
  while (pos < data.length) {
    if (data[pos] === 0) break; // NUL padding after the last record
    const space = data.indexOf(0x20, pos);
    if (space < 0) throw new TarFormatError(entryName, offset, `pax record at ${pos} has no length`);
    const lenText = data.subarray(pos, space).toString('latin1');
    if (!/^[0-9]+$/.test(lenText)) throw new TarFormatError(entryName, offset, `pax record length "${lenText}" is not a number`);
    const len = parseInt(lenText, 10);
    if (len <= space - pos + 1 || pos + len > data.length || data[pos + len - 1] !== 0x0a) {
      throw new TarFormatError(entryName, offset, `pax record at ${pos} declares length ${len}, which does not fit the header`);
    }
    const record = data.subarray(space + 1, pos + len - 1);
    const eq = record.indexOf(0x3d);
    if (eq <= 0) throw new TarFormatError(entryName, offset, `pax record at ${pos} has no key=value`);
    out.set(record.subarray(0, eq).toString('utf8'), Buffer.from(record.subarray(eq + 1)));
    pos += len;
  }
  return out;
}

const TYPES: Record<string, TarEntryType> = {
  '0': 'file',
  '\0': 'file',
  '7': 'file',
  '1': 'hardlink',
  '2': 'symlink',
  '3': 'char',
  '4': 'block',
  '5': 'directory',
  '6': 'fifo',
};

/** Overrides a pax extended header gives the entries it covers. */
interface PaxOverrides {
  path?: string;
  linkpath?: string;
  size?: number;
  uid?: number;
  gid?: number;
  mtime?: number;
  uname?: string;
  gname?: string;
  xattrs: Map<string, Buffer>;
}

function paxOverrides(records: Map<string, Buffer>, entryName: string, offset: number): PaxOverrides {
  const o: PaxOverrides = { xattrs: new Map() };
  const int = (key: string, v: Buffer): number => {
    const t = v.toString('latin1');
    if (!/^[0-9]+$/.test(t) || !Number.isSafeInteger(Number(t)))
      throw new TarFormatError(entryName, offset, `pax ${key}="${t}" is not a valid number`);
    return Number(t);
  };
  for (const [key, value] of records) {
    switch (key) {
      case 'path':
        o.path = value.toString('utf8');
        break;
      case 'linkpath':
        o.linkpath = value.toString('utf8');
        break;
      case 'size':
        o.size = int(key, value);
        break;
      case 'uid':
        o.uid = int(key, value);
        break;
      case 'gid':
        o.gid = int(key, value);
        break;
      case 'mtime': {
        const t = value.toString('latin1');
        if (!/^-?[0-9]+(\.[0-9]+)?$/.test(t)) throw new TarFormatError(entryName, offset, `pax mtime="${t}" is not a valid time`);
        o.mtime = Number(t);
        break;
      }
      case 'uname':
        o.uname = value.toString('utf8');
        break;
      case 'gname':
        o.gname = value.toString('utf8');
        break;
      default:
        if (key.startsWith('SCHILY.xattr.')) o.xattrs.set(key.slice('SCHILY.xattr.'.length), value);
      // Other records (atime, ctime, comment, GNU.sparse…) do not change how a layer unpacks.
    }
  }
  if (o.xattrs.size > MAX_XATTRS_PER_ENTRY)
    throw new TarFormatError(entryName, offset, `${o.xattrs.size} xattrs on one entry (limit ${MAX_XATTRS_PER_ENTRY})`);
  let xattrBytes = 0;
  for (const [k, v] of o.xattrs) xattrBytes += Buffer.byteLength(k) + v.length;
  if (xattrBytes > MAX_XATTR_BYTES_PER_ENTRY)
    throw new TarFormatError(entryName, offset, `${xattrBytes} bytes of xattrs on one entry (limit ${MAX_XATTR_BYTES_PER_ENTRY})`);
  return o;
}

/**
 * The entries of a tar stream, in order. Stops at the end-of-archive marker
 * (a zero block) and leaves any bytes after it unread, so a caller hashing
 * the stream drains the rest itself. Throws TarFormatError for anything
 * malformed; the caller must read or drop each body before the next entry.
 */
export async function* readTar(
  source: AsyncIterable<Buffer | Uint8Array | string>,
  options: TarReaderOptions = {},
): AsyncGenerator<TarEntry> {
  const maxEntry = options.maxEntryBytes ?? DEFAULT_MAX_ENTRY_BYTES;
  const maxMeta = options.maxMetaBytes ?? DEFAULT_MAX_META_BYTES;
  const src = new ByteSource(source);
  let local: PaxOverrides | undefined;
  let longName: string | undefined;
  let longLink: string | undefined;
  let lastName = '(start of archive)';

  const readMeta = async (size: number, name: string, offset: number): Promise<Buffer> => {
    if (size > maxMeta) throw new TarFormatError(name, offset, `a metadata record of ${size} bytes is absurd (limit ${maxMeta})`);
    const data = await src.read(size);
    if (data.length < size)
      throw new TarFormatError(name, offset, `archive truncated inside a metadata record (${data.length} of ${size} bytes)`);
    await skipPadding(size, name, offset);
    return data;
  };
  /**
   * Reads the padding after a body. False when the stream ended cleanly right
   * after the entry's last byte (no padding, no end marker): Go's archive/tar,
   * and so Docker and containerd, read that as the end of the archive, and
   * `umoci insert` writes such layers. A cut there still changes the diff id,
   * which the caller checks.
   */
  const skipPadding = async (size: number, name: string, offset: number): Promise<boolean> => {
    const pad = (BLOCK_SIZE - (size % BLOCK_SIZE)) % BLOCK_SIZE;
    if (!pad) return true;
    const got = (await src.read(pad)).length;
    if (got === 0) return false;
    if (got < pad) throw new TarFormatError(name, offset, 'archive truncated in the padding after the entry');
    return true;
  };

  for (;;) {
    const offset = src.position;
    const block = await src.read(BLOCK_SIZE);
    if (block.length === 0) {
      if (local || longName !== undefined || longLink !== undefined)
        throw new TarFormatError(lastName, offset, 'archive ends after an extended header, without its entry');
      // No end-of-archive marker: the stream ended at an entry boundary. Go's archive/tar (Docker, containerd) reads that as
      // the end, and `umoci insert` writes layers so; a tar cut there is caught by its diff id, which the caller checks.
      return;
    }
    if (block.length < BLOCK_SIZE)
      throw new TarFormatError(lastName, offset, `archive truncated inside a header (${block.length} of ${BLOCK_SIZE} bytes)`);
    if (isZeroBlock(block)) {
      if (local || longName !== undefined || longLink !== undefined)
        throw new TarFormatError(lastName, offset, 'end-of-archive marker right after an extended header');
      return;
    }

    const rawName = cString(block, 0, 100);
    const headerName = rawName || '(unnamed)';
    const storedSum = parseNumericField(block, 148, 8);
    if (storedSum === undefined || !checksumMatches(block, storedSum)) {
      throw new TarFormatError(headerName, offset, 'header checksum mismatch');
    }
    const magic = block.subarray(257, 263).toString('latin1');
    const isUstar = magic === 'ustar\0';
    const typeflag = String.fromCharCode(block[156]!);
    const declaredSize = parseNumericField(block, 124, 12);
    if (declaredSize === undefined) throw new TarFormatError(headerName, offset, 'size field is not a number');

    if (typeflag === 'g') {
      // A pax global header is read past and ignored, as containerd and moby do: one diff id unpacks the same everywhere.
      await readMeta(declaredSize, headerName, offset);
      continue;
    }
    if (typeflag === 'x') {
      const records = parsePaxRecords(await readMeta(declaredSize, headerName, offset), headerName, offset);
      local = paxOverrides(records, headerName, offset);
      continue;
    }
    if (typeflag === 'L' || typeflag === 'K') {
      const data = await readMeta(declaredSize, headerName, offset);
      const nul = data.indexOf(0);
      const value = data.subarray(0, nul < 0 ? data.length : nul).toString('utf8');
      if (typeflag === 'L') longName = value;
      else longLink = value;
      continue;
    }

    const type = TYPES[typeflag];
    let name = rawName;
    if (isUstar) {
      const prefix = cString(block, 345, 155);
      if (prefix) name = `${prefix}/${rawName}`;
    }
    name = local?.path ?? longName ?? name;
    lastName = name || '(unnamed)';
    if (!type) {
      throw new TarFormatError(
        lastName,
        offset,
        `entry type "${typeflag === '\0' ? 'NUL' : typeflag}" is not supported in image layers (GNU sparse, multi-volume and vendor types are refused)`,
      );
    }
    if (!name) throw new TarFormatError(lastName, offset, 'entry has an empty name');

    const num = (start: number, len: number, what: string): number => {
      const v = parseNumericField(block, start, len);
      if (v === undefined) throw new TarFormatError(lastName, offset, `${what} field is not a number`);
      return v;
    };
    const size = local?.size ?? declaredSize;
    if (size > maxEntry || !Number.isSafeInteger(size)) {
      throw new TarFormatError(lastName, offset, `declared size ${size} bytes is absurd (limit ${maxEntry})`);
    }
    // Only regular files carry a body: links, dirs, devices and fifos are header-only whatever their size field says (as Go's archive/tar reads them).
    const bodySize = type === 'file' ? size : 0;

    const xattrs = new Map(local?.xattrs ?? []);
    const entryName = lastName;
    let consumed = false;
    /** Body bytes handed to the caller so far: whatever it leaves unread is skipped before the next header. */
    let bodyRead = 0;
    const body = async function* (): AsyncGenerator<Buffer> {
      if (consumed) throw new TarFormatError(entryName, offset, 'body read twice');
      consumed = true;
      for await (const chunk of src.chunks(bodySize - bodyRead)) {
        bodyRead += chunk.length;
        yield chunk;
      }
      if (bodyRead < bodySize)
        throw new TarFormatError(entryName, offset, `archive truncated inside the entry's body (${bodyRead} of ${bodySize} bytes)`);
    };
    const entry: TarEntry = {
      name,
      type,
      mode: num(100, 8, 'mode') & 0o7777,
      uid: local?.uid ?? num(108, 8, 'uid'),
      gid: local?.gid ?? num(116, 8, 'gid'),
      uname: local?.uname ?? (isUstar || magic === 'ustar ' ? cString(block, 265, 32) : ''),
      gname: local?.gname ?? (isUstar || magic === 'ustar ' ? cString(block, 297, 32) : ''),
      mtime: local?.mtime ?? num(136, 12, 'mtime'),
      size: bodySize,
      linkname: local?.linkpath ?? longLink ?? cString(block, 157, 100),
      devmajor: type === 'char' || type === 'block' ? num(329, 8, 'devmajor') : 0,
      devminor: type === 'char' || type === 'block' ? num(337, 8, 'devminor') : 0,
      xattrs,
      offset,
      body: { [Symbol.asyncIterator]: body },
    };
    local = undefined;
    longName = undefined;
    longLink = undefined;
    yield entry;
    // Skip what the caller did not read (all of it, or the rest after it stopped early).
    const left = bodySize - bodyRead;
    if (left > 0) {
      consumed = true;
      let got = 0;
      for await (const chunk of src.chunks(left)) got += chunk.length;
      bodyRead += got;
      if (got < left)
        throw new TarFormatError(entryName, offset, `archive truncated inside the entry's body (${bodyRead} of ${bodySize} bytes)`);
    }
    if (!(await skipPadding(bodySize, entryName, offset))) return;
  }
}
