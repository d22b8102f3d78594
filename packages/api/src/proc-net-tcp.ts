// Which user owns the other end of a TCP connection that comes from this
// machine: the kernel lists every TCP socket of the network namespace in
// /proc/net/tcp and /proc/net/tcp6 with the uid of the process that made it
// (a socket's uid is set when it is created and cannot be changed by its
// owner). The API finds the client's socket there by its address and port.
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';

/** One row of /proc/net/tcp or tcp6. */
export interface ProcTcpSocket {
  local: { address: string; port: number };
  remote: { address: string; port: number };
  /** The kernel's TCP state number (1 ESTABLISHED … 6 TIME_WAIT … 10 LISTEN). */
  state: number;
  uid: number;
  /**
   * The socket's inode; 0 when no process holds the socket any more (it was
   * closed and the kernel finishes the connection on its own: TIME_WAIT, a
   * FIN_WAIT2 after close, any orphaned socket). The kernel shows such a
   * socket with uid 0 (one kept as FIN_WAIT2 or TIME_WAIT on every kernel,
   * any orphan on older ones), which is nobody's, not root's.
   */
  inode: number;
}

/** A socket in TIME_WAIT belongs to no process any more: the kernel shows it with uid 0. */
const TCP_TIME_WAIT = 6;

/** The files the kernel lists this namespace's TCP sockets in. */
export const PROC_NET_TCP_FILES = ['/proc/net/tcp', '/proc/net/tcp6'] as const;

/**
 * The rows of /proc/net/tcp (IPv4) or /proc/net/tcp6. Addresses are hex
 * words in the machine's byte order; they come back in canonicalAddress's
 * form. Rows that do not read as such are left out.
 */
export function parseProcNetTcp(text: string, littleEndian = os.endianness() === 'LE'): ProcTcpSocket[] {
  const rows: ProcTcpSocket[] = [];
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    const local = hexEndpoint(f[1]!, littleEndian);
    const remote = hexEndpoint(f[2]!, littleEndian);
    const state = parseInt(f[3]!, 16);
    const uid = Number(f[7]);
    const inode = Number(f[9]);
    if (!local || !remote || !Number.isInteger(state) || !Number.isSafeInteger(uid) || uid < 0 || !Number.isSafeInteger(inode) || inode < 0)
      continue;
    rows.push({ local, remote, state, uid, inode });
  }
  return rows;
}

function hexEndpoint(field: string, littleEndian: boolean): { address: string; port: number } | undefined {
  const m = /^([0-9A-Fa-f]{8}|[0-9A-Fa-f]{32}):([0-9A-Fa-f]{4})$/.exec(field);
  if (!m) return undefined;
  const bytes = Buffer.from(m[1]!, 'hex');
  // Each 32-bit word is printed as the machine holds it: swap back to network order on little-endian machines.
  if (littleEndian) for (let i = 0; i < bytes.length; i += 4) bytes.subarray(i, i + 4).reverse();
  const address = bytes.length === 4 ? [...bytes].join('.') : canonicalAddress(ipv6Text(bytes));
  return { address, port: parseInt(m[2]!, 16) };
}

function ipv6Text(bytes: Buffer): string {
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
  return groups.join(':');
}

/**
 * One spelling per address, so that Node's and the kernel's can be
 * compared: IPv4 (and IPv4-mapped IPv6, as a dual-stack socket reports an
 * IPv4 peer) dotted; IPv6 as eight lower-case hex groups without zeros cut.
 */
export function canonicalAddress(ip: string): string {
  const a = ip.toLowerCase().replace(/%.*$/, '');
  if (net.isIPv4(a)) return a;
  if (!net.isIPv6(a)) return a;
  let head = a;
  let v4: string | undefined;
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (dotted) {
    head = `${dotted[1]}0:0`;
    v4 = dotted[2];
  }
  const [left, right] = head.includes('::') ? head.split('::') : [head, undefined];
  const l = left ? left.split(':') : [];
  const r = right !== undefined && right !== '' ? right.split(':') : [];
  const groups = right === undefined ? l : [...l, ...Array<string>(8 - l.length - r.length).fill('0'), ...r];
  const words = groups.map((g) => parseInt(g, 16));
  if (v4 !== undefined) {
    const [b0, b1, b2, b3] = v4.split('.').map(Number) as [number, number, number, number];
    words[6] = (b0 << 8) | b1;
    words[7] = (b2 << 8) | b3;
  }
  // ::ffff:a.b.c.d is an IPv4 peer on a dual-stack socket.
  if (words.slice(0, 5).every((w) => w === 0) && words[5] === 0xffff)
    return `${words[6]! >> 8}.${words[6]! & 0xff}.${words[7]! >> 8}.${words[7]! & 0xff}`;
  return words.map((w) => w.toString(16)).join(':');
}

/**
 * The uid owning the client end of a connection whose client is `client`
 * and server `server`, among `sockets`; undefined when no such socket is
 * listed (the client is on another machine or in another network
 * namespace) or no process holds it any more (inode 0: a client that sent
 * its request and closed its socket is listed with uid 0). Should two rows
 * match, the answer is root only if both say so.
 */
export function clientSocketOwner(
  sockets: readonly ProcTcpSocket[],
  client: { address: string; port: number },
  server: { address: string; port: number },
): number | undefined {
  const c = canonicalAddress(client.address);
  const s = canonicalAddress(server.address);
  let owner: number | undefined;
  for (const row of sockets) {
    if (row.state === TCP_TIME_WAIT || row.inode === 0) continue;
    if (row.local.port !== client.port || row.remote.port !== server.port || row.local.address !== c || row.remote.address !== s) continue;
    owner = owner === undefined || owner === 0 ? row.uid : owner;
  }
  return owner;
}

/**
 * The uid of the local process at the other end of `socket` (an accepted
 * connection), read from /proc/net/tcp and tcp6; undefined when the client
 * is not a socket of this machine's network namespace. Throws when a file
 * cannot be read (out of file descriptors, say): nobody is known then, and
 * the caller says so rather than take anyone for root or for a stranger.
 * Read synchronously: the kernel
 * writes the files out in memory, and a request's handling then goes on in
 * the same order as with a token (its body timer set at once).
 */
export function connectionPeerUid(
  socket: net.Socket,
  readFile: (file: string) => string = (f) => fs.readFileSync(f, 'utf8'),
): number | undefined {
  const { remoteAddress, remotePort, localAddress, localPort } = socket;
  if (remoteAddress === undefined || remotePort === undefined || localAddress === undefined || localPort === undefined) return undefined;
  const texts = PROC_NET_TCP_FILES.map((f) => {
    try {
      return readFile(f);
    } catch (err) {
      // tcp6 is absent on a kernel without IPv6: it lists nobody.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return '';
      throw err;
    }
  });
  return clientSocketOwner(
    texts.flatMap((t) => parseProcNetTcp(t)),
    { address: remoteAddress, port: remotePort },
    { address: localAddress, port: localPort },
  );
}
