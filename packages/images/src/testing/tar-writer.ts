// A tiny tar writer for tests: builds layer archives entry by entry, in
// ustar with pax extended headers or GNU long names when a field does not
// fit, and lets a test break them on purpose (a wrong checksum, a cut-off
// body, a declared size that lies). Not for production: it holds the whole
// archive in memory.

export type TestTarEntryType = 'file' | 'hardlink' | 'symlink' | 'char' | 'block' | 'directory' | 'fifo';

export interface TestTarEntry {
  readonly name: string;
  readonly type?: TestTarEntryType;
  /** Body of a file (string as UTF-8). */
  readonly body?: Buffer | string;
  readonly mode?: number;
  readonly uid?: number;
  readonly gid?: number;
  readonly uname?: string;
  readonly gname?: string;
  /** Seconds since the epoch. */
  readonly mtime?: number;
  readonly linkname?: string;
  readonly devmajor?: number;
  readonly devminor?: number;
  /** Extra pax records (e.g. { 'SCHILY.xattr.user.k': 'v', size: '999' }); forces a pax header. */
  readonly pax?: Readonly<Record<string, string>>;
  /** Long names and link names as GNU 'L'/'K' records instead of pax. */
  readonly gnuLongNames?: boolean;
  /** Store this in the checksum field instead of the right sum. */
  readonly badChecksum?: boolean;
  /** Write this size in the header instead of the body's length. */
  readonly declaredSize?: number;
}

const TYPEFLAGS: Record<TestTarEntryType, string> = {
  file: '0',
  hardlink: '1',
  symlink: '2',
  char: '3',
  block: '4',
  directory: '5',
  fifo: '6',
};

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width - 1, '0') + '\0';
}

function header(fields: {
  name: string;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: number;
  typeflag: string;
  linkname: string;
  uname: string;
  gname: string;
  devmajor: number;
  devminor: number;
  badChecksum?: boolean;
}): Buffer {
  const b = Buffer.alloc(512);
  b.write(fields.name, 0, 100, 'utf8');
  b.write(octal(fields.mode, 8), 100, 'latin1');
  b.write(octal(fields.uid, 8), 108, 'latin1');
  b.write(octal(fields.gid, 8), 116, 'latin1');
  b.write(octal(fields.size, 12), 124, 'latin1');
  b.write(octal(Math.floor(fields.mtime), 12), 136, 'latin1');
  b.write('        ', 148, 'latin1');
  b.write(fields.typeflag, 156, 'latin1');
  b.write(fields.linkname, 157, 100, 'utf8');
  b.write('ustar\0', 257, 'latin1');
  b.write('00', 263, 'latin1');
  b.write(fields.uname, 265, 32, 'utf8');
  b.write(fields.gname, 297, 32, 'utf8');
  b.write(octal(fields.devmajor, 8), 329, 'latin1');
  b.write(octal(fields.devminor, 8), 337, 'latin1');
  let sum = 0;
  for (const byte of b) sum += byte;
  if (fields.badChecksum) sum += 1;
  b.write(octal(sum, 7) + ' ', 148, 'latin1');
  return b;
}

function pad(data: Buffer): Buffer {
  const rest = data.length % 512;
  return rest ? Buffer.concat([data, Buffer.alloc(512 - rest)]) : data;
}

/** One pax record: the length counts itself, so it is found by iteration. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  let len = Buffer.byteLength(body);
  for (;;) {
    const total = String(len).length + Buffer.byteLength(body);
    if (total === len) return `${len}${body}`;
    len = total;
  }
}

/** The bytes of one entry (its extended headers, header, body and padding). */
export function tarEntryBytes(e: TestTarEntry): Buffer {
  const type = e.type ?? 'file';
  const body = type === 'file' ? Buffer.from(e.body ?? '') : Buffer.alloc(0);
  const linkname = e.linkname ?? '';
  const parts: Buffer[] = [];
  const tooLong = (s: string) => Buffer.byteLength(s) > 99;
  const pax: Record<string, string> = { ...(e.pax ?? {}) };
  let name = e.name;
  let link = linkname;
  if (e.gnuLongNames) {
    for (const [flag, value] of [
      ['L', e.name],
      ['K', linkname],
    ] as const) {
      if (!tooLong(value)) continue;
      const data = Buffer.from(`${value}\0`);
      parts.push(
        header({
          name: '././@LongLink',
          mode: 0,
          uid: 0,
          gid: 0,
          size: data.length,
          mtime: 0,
          typeflag: flag,
          linkname: '',
          uname: '',
          gname: '',
          devmajor: 0,
          devminor: 0,
        }),
        pad(data),
      );
    }
    name = e.name.slice(0, 99);
    link = linkname.slice(0, 99);
  } else {
    if (tooLong(e.name)) pax.path = e.name;
    if (tooLong(linkname)) pax.linkpath = linkname;
    if (pax.path !== undefined) name = `PaxHeaders/${e.name.slice(-80)}`;
    if (pax.linkpath !== undefined) link = '';
  }
  if (Object.keys(pax).length) {
    const data = Buffer.from(
      Object.entries(pax)
        .map(([k, v]) => paxRecord(k, v))
        .join(''),
    );
    parts.push(
      header({
        name: 'PaxHeader',
        mode: 0o644,
        uid: 0,
        gid: 0,
        size: data.length,
        mtime: 0,
        typeflag: 'x',
        linkname: '',
        uname: '',
        gname: '',
        devmajor: 0,
        devminor: 0,
      }),
      pad(data),
    );
  }
  parts.push(
    header({
      name,
      mode: e.mode ?? (type === 'directory' ? 0o755 : 0o644),
      uid: e.uid ?? 0,
      gid: e.gid ?? 0,
      size: e.declaredSize ?? body.length,
      mtime: e.mtime ?? 1_700_000_000,
      typeflag: TYPEFLAGS[type],
      linkname: link,
      uname: e.uname ?? '',
      gname: e.gname ?? '',
      devmajor: e.devmajor ?? 0,
      devminor: e.devminor ?? 0,
      badChecksum: e.badChecksum,
    }),
    pad(body),
  );
  return Buffer.concat(parts);
}

/** A whole archive: the entries, then the two zero blocks that end a tar. */
export function buildTar(entries: readonly TestTarEntry[], options: { endMarker?: boolean } = {}): Buffer {
  const parts = entries.map(tarEntryBytes);
  if (options.endMarker !== false) parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}
