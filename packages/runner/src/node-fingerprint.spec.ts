import { nodeValues } from '@csiplug/jobspec';
import * as os from 'os';
import {
  MACHINE,
  defaultRouteInterface,
  fingerprintNode,
  goArch,
  osRelease,
  pickAddress,
  type FingerprintSources,
} from './node-fingerprint';

const ROUTE_HEADER = 'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT';
const route = (...lines: string[]) => [ROUTE_HEADER, ...lines].join('\n') + '\n';

describe('goArch', () => {
  it.each<[string, 'BE' | 'LE', string]>([
    ['x64', 'LE', 'amd64'],
    ['arm64', 'LE', 'arm64'],
    ['arm', 'LE', 'arm'],
    ['ia32', 'LE', '386'],
    ['ppc64', 'LE', 'ppc64le'],
    ['ppc64', 'BE', 'ppc64'],
    ['s390x', 'BE', 's390x'],
    ['riscv64', 'LE', 'riscv64'],
    ['mipsel', 'LE', 'mipsle'],
  ])("Node's %s (%s) is Go's %s", (node, endianness, go) => {
    expect(goArch(node, endianness)).toBe(go);
  });
});

describe('defaultRouteInterface', () => {
  it('takes the interface of the up route to 0.0.0.0/0', () => {
    expect(
      defaultRouteInterface(
        route(
          'docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0',
          'ens3\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0',
          'ens3\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0',
        ),
      ),
    ).toBe('ens3');
  });

  it('of several default routes, the lowest metric; a route that is down does not count', () => {
    expect(
      defaultRouteInterface(
        route(
          'wlan0\t00000000\t0102A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0',
          'eth1\t00000000\t0101000A\t0002\t0\t0\t10\t00000000\t0\t0\t0',
          'eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0',
        ),
      ),
    ).toBe('eth0');
  });

  it('is undefined without a default route, or for empty text', () => {
    expect(defaultRouteInterface(route('lo\t0000007F\t00000000\t0001\t0\t0\t0\t000000FF\t0\t0\t0'))).toBeUndefined();
    expect(defaultRouteInterface('')).toBeUndefined();
  });
});

describe('pickAddress', () => {
  it("takes the interface's first address that is not link-local, as Nomad", () => {
    expect(
      pickAddress([
        { address: 'fe80::1', family: 'IPv6' },
        { address: '169.254.3.4', family: 'IPv4' },
        { address: '10.0.0.7', family: 'IPv4' },
        { address: '2001:db8::7', family: 'IPv6' },
      ]),
    ).toBe('10.0.0.7');
  });

  it('a link-local one only when it has no other; nothing for no address', () => {
    expect(pickAddress([{ address: 'fe80::1', family: 'IPv6' }])).toBe('fe80::1');
    expect(pickAddress([])).toBeUndefined();
  });
});

describe('osRelease', () => {
  it('reads ID and VERSION_ID, quoted or not', () => {
    expect(osRelease('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n')).toEqual({
      name: 'debian',
      version: '12',
    });
    expect(osRelease("ID='ubuntu'\nVERSION_ID=24.04\n")).toEqual({ name: 'ubuntu', version: '24.04' });
    expect(osRelease('')).toEqual({});
  });
});

describe('fingerprintNode', () => {
  const config = { id: 'n1', name: 'storage-1', datacenter: 'dc2', region: 'eu', nodeClass: 'fast', meta: { rack: 'r7' } };
  const files: Record<string, string> = {
    '/proc/net/route': route('eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0'),
    '/etc/os-release': 'ID=debian\nVERSION_ID="12"\n',
  };
  const sources = (over: Partial<FingerprintSources> = {}): FingerprintSources => ({
    hostname: () => 'host-a',
    readFile: (f) => files[f],
    networkInterfaces: () => ({
      lo: [{ address: '127.0.0.1', family: 'IPv4', internal: true, netmask: '255.0.0.0', mac: '00:00:00:00:00:00', cidr: '127.0.0.1/8' }],
      eth0: [
        {
          address: '192.168.1.20',
          family: 'IPv4',
          internal: false,
          netmask: '255.255.255.0',
          mac: '52:54:00:00:00:01',
          cidr: '192.168.1.20/24',
        },
      ],
      eth1: [
        { address: '10.9.0.4', family: 'IPv4', internal: false, netmask: '255.255.0.0', mac: '52:54:00:00:00:02', cidr: '10.9.0.4/16' },
      ],
    }),
    kernelRelease: () => '6.1.0-18-amd64',
    machine: () => 'x86_64',
    platform: 'linux',
    arch: 'x64',
    endianness: 'LE',
    cpuCount: () => 4,
    totalMemory: () => 8 * 1024 ** 3,
    ...over,
  });

  it("joins the agent config's node with the machine's attributes, under Nomad's names", () => {
    const node = fingerprintNode(config, sources());
    expect(nodeValues(node)).toEqual({
      'node.unique.id': 'n1',
      'node.unique.name': 'storage-1',
      'node.datacenter': 'dc2',
      'node.region': 'eu',
      'node.class': 'fast',
      'attr.unique.hostname': 'host-a',
      'attr.unique.network.ip-address': '192.168.1.20',
      'attr.kernel.name': 'linux',
      'attr.kernel.version': '6.1.0-18-amd64',
      'attr.kernel.arch': 'x86_64',
      'attr.cpu.arch': 'amd64',
      'attr.cpu.numcores': '4',
      'attr.memory.totalbytes': String(8 * 1024 ** 3),
      'attr.os.name': 'debian',
      'attr.os.version': '12',
      'meta.rack': 'r7',
    });
  });

  it('client { network_interface } names the interface instead of the default route', () => {
    expect(fingerprintNode({ ...config, networkInterface: 'eth1' }, sources()).attributes['unique.network.ip-address']).toBe('10.9.0.4');
  });

  it('leaves out what the machine does not tell (no default route, no os-release)', () => {
    const attrs = fingerprintNode(config, sources({ readFile: () => undefined })).attributes;
    expect(attrs).not.toHaveProperty('unique.network.ip-address');
    expect(attrs).not.toHaveProperty('os.name');
    expect(attrs['unique.hostname']).toBe('host-a');
  });

  it('on this machine: the host name, Go arch and kernel release as the OS says them', () => {
    const attrs = fingerprintNode(config, MACHINE).attributes;
    expect(attrs['unique.hostname']).toBe(os.hostname());
    expect(attrs['kernel.version']).toBe(os.release());
    expect(attrs['cpu.arch']).toBe(goArch(process.arch, os.endianness()));
    expect(attrs['cpu.arch']).not.toBe('x64');
  });
});
