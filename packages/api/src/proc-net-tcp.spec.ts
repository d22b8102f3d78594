// Reading /proc/net/tcp and tcp6: fixtures as the kernel prints them, and one
// real connection looked up in this machine's own files.
import * as fs from 'fs';
import * as net from 'net';
import { canonicalAddress, clientSocketOwner, connectionPeerUid, parseProcNetTcp } from './proc-net-tcp';

// A listener on 127.0.0.1:4747 (0x128B), a client of uid 65534 on port 40000 (0x9C40) connected to it, the
// server's end (uid 0), and a TIME_WAIT row (uid 0, as the kernel shows it) of an older connection from port 40001.
// Port 40004 (0x9C44): a client that sent its request and closed its socket at once, its FIN acknowledged: the
// kernel keeps it as FIN_WAIT2 (05) with uid 0 and inode 0. Port 40005 (0x9C45): the same closed socket before the
// acknowledgement (FIN_WAIT1, 04), as kernels that show an orphaned socket's uid as 0 list it.
const TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:128B 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1594 1 0000000000000000 100 0 0 10 0
   1: 0100007F:9C40 0100007F:128B 01 00000000:00000000 00:00000000 00000000 65534        0 2001 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:128B 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2002 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:9C41 0100007F:128B 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
   4: 0100007F:9C44 0100007F:128B 05 00000000:00000000 03:00001755 00000000     0        0 0 3 0000000066e01879
   5: 0100007F:9C45 0100007F:128B 04 00000001:00000000 01:00000014 00000000     0        0 0 2 0000000051720eed 20 0 0 11 -1
`;

// ::1 port 40002 (0x9C42, uid 1000) to [::1]:4747, and an IPv4 client on a dual-stack socket (::ffff:127.0.0.1) of uid 0.
const TCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:9C42 00000000000000000000000001000000:128B 01 00000000:00000000 00:00000000 00000000  1000        0 3001 1 0000000000000000 20 4 30 10 -1
   1: 0000000000000000FFFF00000100007F:9C43 0000000000000000FFFF00000100007F:128B 01 00000000:00000000 00:00000000 00000000     0        0 3002 1 0000000000000000 20 4 30 10 -1
`;

describe('parseProcNetTcp', () => {
  it('reads addresses in the machine byte order, ports, state and uid', () => {
    const rows = parseProcNetTcp(TCP, true);
    expect(rows).toHaveLength(6);
    expect(rows[1]).toEqual({
      local: { address: '127.0.0.1', port: 40000 },
      remote: { address: '127.0.0.1', port: 4747 },
      state: 1,
      uid: 65534,
      inode: 2001,
    });
    expect(rows[4]).toMatchObject({ state: 5, uid: 0, inode: 0 });
    expect(rows[3]!.state).toBe(6);
    // On a big-endian machine the words are printed as they are on the wire.
    expect(parseProcNetTcp(TCP.replaceAll('0100007F', '7F000001'), false)[1]!.local.address).toBe('127.0.0.1');
  });

  it('reads IPv6 rows, an IPv4-mapped address as IPv4', () => {
    const rows = parseProcNetTcp(TCP6, true);
    expect(rows[0]!.local).toEqual({ address: '0:0:0:0:0:0:0:1', port: 40002 });
    expect(rows[1]!.local).toEqual({ address: '127.0.0.1', port: 40003 });
  });

  it('skips lines that are not rows', () => {
    expect(parseProcNetTcp('header\n\ngarbage here\n   0: zz:11 00:00 01 x x x x notanumber\n', true)).toEqual([]);
  });
});

describe('canonicalAddress', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['::ffff:127.0.0.1', '127.0.0.1'],
    ['::FFFF:7f00:1', '127.0.0.1'],
    ['::1', '0:0:0:0:0:0:0:1'],
    ['fe80::1%eth0', 'fe80:0:0:0:0:0:0:1'],
    ['2001:db8::a:0:1', '2001:db8:0:0:0:a:0:1'],
  ])('%s → %s', (given, canonical) => {
    expect(canonicalAddress(given)).toBe(canonical);
  });
});

describe('clientSocketOwner', () => {
  const rows = [...parseProcNetTcp(TCP, true), ...parseProcNetTcp(TCP6, true)];
  const server = { address: '127.0.0.1', port: 4747 };

  it('finds the client end of the connection, never the server end', () => {
    expect(clientSocketOwner(rows, { address: '127.0.0.1', port: 40000 }, server)).toBe(65534);
    expect(clientSocketOwner(rows, { address: '::1', port: 40002 }, { address: '::1', port: 4747 })).toBe(1000);
    expect(clientSocketOwner(rows, { address: '::ffff:127.0.0.1', port: 40003 }, { address: '::ffff:127.0.0.1', port: 4747 })).toBe(0);
  });

  it('knows no owner for a socket it does not list, or one in TIME_WAIT (uid 0 there means nobody)', () => {
    expect(clientSocketOwner(rows, { address: '10.0.0.9', port: 40000 }, server)).toBeUndefined();
    expect(clientSocketOwner(rows, { address: '127.0.0.1', port: 40001 }, server)).toBeUndefined();
  });

  it('knows no owner for a socket no process holds any more (inode 0), though the kernel lists it as uid 0', () => {
    // A local user sends a request and closes the socket before the agent reads it: that is not root.
    expect(clientSocketOwner(rows, { address: '127.0.0.1', port: 40004 }, server)).toBeUndefined();
    expect(clientSocketOwner(rows, { address: '127.0.0.1', port: 40005 }, server)).toBeUndefined();
  });

  it('two rows for one connection: root only if both say root', () => {
    const twice = [...rows, { local: { address: '127.0.0.1', port: 40000 }, remote: server, state: 1, uid: 0, inode: 2003 }];
    expect(clientSocketOwner(twice, { address: '127.0.0.1', port: 40000 }, server)).toBe(65534);
    const rootFirst = [{ local: { address: '127.0.0.1', port: 40000 }, remote: server, state: 1, uid: 0, inode: 2003 }, ...rows];
    expect(clientSocketOwner(rootFirst, { address: '127.0.0.1', port: 40000 }, server)).toBe(65534);
  });
});

describe('connectionPeerUid', () => {
  it("finds this process's own uid for a real loopback connection (this machine's /proc/net/tcp)", async () => {
    const server = net.createServer();
    const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const client = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
    try {
      const socket = await accepted;
      expect(connectionPeerUid(socket)).toBe(process.getuid!());
      // A file that cannot be read is an error, not an answer; a missing tcp6 (no IPv6) lists nobody.
      const failing = Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' });
      expect(() =>
        connectionPeerUid(socket, () => {
          throw failing;
        }),
      ).toThrow(failing);
      const real = (f: string) => fs.readFileSync(f, 'utf8');
      const noV6 = (f: string) => {
        if (f.endsWith('tcp6')) throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
        return real(f);
      };
      expect(connectionPeerUid(socket, noV6)).toBe(process.getuid!());
      socket.destroy();
    } finally {
      client.destroy();
      await new Promise((r) => server.close(r));
    }
  });
});
