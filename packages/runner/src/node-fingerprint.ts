// The node's fingerprint: the `attr.*` values of jobspec's NODE_ATTRIBUTES
// read from this machine as Nomad's fingerprinters read them (host, cpu,
// memory, network), joined with what the agent config says of the node
// (name, datacenter, region, class, meta) into the NodeAttributes that
// `${…}` interpolation resolves against. The parsers are pure and take the
// text of /proc/net/route and /etc/os-release, so they are tested on any
// machine; fingerprintNode reads the real files unless given others.
//
// Nomad's choices kept here: unique.network.ip-address is the first address
// of the interface the default route goes out of (client { network_interface }
// names another), a link-local one only when it has no other; cpu.arch is
// Go's GOARCH (amd64, arm64), not Node's x64; kernel.name is Go's GOOS.
import type { NodeAttributes, NodeConfig } from '@csiplug/jobspec';
import * as fs from 'fs';
import * as os from 'os';

/** Node's `process.arch` → Go's GOARCH (ppc64 and mips by byte order, as Go names them). */
export function goArch(nodeArch: string, endianness: 'BE' | 'LE' = 'LE'): string {
  switch (nodeArch) {
    case 'x64':
      return 'amd64';
    case 'ia32':
      return '386';
    case 'ppc64':
      return endianness === 'LE' ? 'ppc64le' : 'ppc64';
    case 'mips':
      return endianness === 'LE' ? 'mipsle' : 'mips';
    case 'mipsel':
      return 'mipsle';
    default:
      // arm, arm64, s390x, riscv64, loong64, ppc: the same word in both.
      return nodeArch;
  }
}

/**
 * The interface of the default IPv4 route in /proc/net/route text: the up
 * route to 0.0.0.0/0 of the lowest metric (the first of those on a tie, as
 * the kernel lists them); undefined when there is none.
 */
export function defaultRouteInterface(procNetRoute: string): string | undefined {
  const RTF_UP = 0x1;
  let best: { iface: string; metric: number } | undefined;
  for (const line of procNetRoute.split('\n').slice(1)) {
    const cols = line.trim().split(/\s+/);
    if (cols.length < 8) continue;
    const [iface, destination, , flags, , , metric, mask] = cols as [string, string, string, string, string, string, string, string];
    if (parseInt(destination, 16) !== 0 || parseInt(mask, 16) !== 0) continue;
    if ((parseInt(flags, 16) & RTF_UP) === 0) continue;
    const m = Number(metric);
    if (!best || m < best.metric) best = { iface, metric: m };
  }
  return best?.iface;
}

/** Whether an address is link-local (169.254.0.0/16, fe80::/10), which Nomad takes only when an interface has no other. */
function linkLocal(address: string, family: string | number): boolean {
  if (family === 'IPv4' || family === 4) return address.startsWith('169.254.');
  return /^fe[89ab][0-9a-f]:/i.test(address);
}

/** The address Nomad takes of an interface: its first that is not link-local, else its first link-local. */
export function pickAddress(addrs: readonly Pick<os.NetworkInterfaceInfo, 'address' | 'family'>[]): string | undefined {
  return (addrs.find((a) => !linkLocal(a.address, a.family)) ?? addrs[0])?.address;
}

/** ID and VERSION_ID of /etc/os-release text (quotes taken off), as gopsutil reads the platform. */
export function osRelease(text: string): { name?: string; version?: string } {
  const values: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^\s*([A-Z_]+)=(.*)$/.exec(line);
    if (m) values[m[1]!] = m[2]!.trim().replace(/^(["'])(.*)\1$/, '$2');
  }
  return { ...(values.ID ? { name: values.ID } : {}), ...(values.VERSION_ID ? { version: values.VERSION_ID } : {}) };
}

/** Where the fingerprint reads the machine; tests give their own. */
export interface FingerprintSources {
  hostname(): string;
  /** The text of a file, undefined when it cannot be read. */
  readFile(file: string): string | undefined;
  networkInterfaces(): NodeJS.Dict<os.NetworkInterfaceInfo[]>;
  kernelRelease(): string;
  machine(): string;
  /** Node's process.platform and process.arch. */
  platform: string;
  arch: string;
  endianness: 'BE' | 'LE';
  cpuCount(): number;
  totalMemory(): number;
}

export const MACHINE: FingerprintSources = {
  hostname: () => os.hostname(),
  readFile: (file) => {
    try {
      return fs.readFileSync(file, 'utf8');
    } catch {
      return undefined;
    }
  },
  networkInterfaces: () => os.networkInterfaces(),
  kernelRelease: () => os.release(),
  machine: () => os.machine(),
  platform: process.platform,
  arch: process.arch,
  endianness: os.endianness(),
  cpuCount: () => os.cpus().length,
  totalMemory: () => os.totalmem(),
};

/**
 * This node for interpolation: the agent config's `id` and NodeConfig with
 * the machine's attributes. An attribute the machine does not tell (no
 * default route, no os-release) is left out: a job using it fails to start
 * with an error naming it, never with the name passed on.
 */
export function fingerprintNode(config: { id: string } & NodeConfig, sources: FingerprintSources = MACHINE): NodeAttributes {
  const attributes: Record<string, string> = {
    'unique.hostname': sources.hostname(),
    // Go's GOOS: Node's platform names but for Windows.
    'kernel.name': sources.platform === 'win32' ? 'windows' : sources.platform,
    'kernel.version': sources.kernelRelease(),
    'kernel.arch': sources.machine(),
    'cpu.arch': goArch(sources.arch, sources.endianness),
    'cpu.numcores': String(sources.cpuCount()),
    'memory.totalbytes': String(sources.totalMemory()),
  };
  const release = osRelease(sources.readFile('/etc/os-release') ?? sources.readFile('/usr/lib/os-release') ?? '');
  if (release.name !== undefined) attributes['os.name'] = release.name;
  if (release.version !== undefined) attributes['os.version'] = release.version;
  const iface = config.networkInterface ?? defaultRouteInterface(sources.readFile('/proc/net/route') ?? '');
  const address = iface !== undefined ? pickAddress(sources.networkInterfaces()[iface] ?? []) : undefined;
  if (address !== undefined) attributes['unique.network.ip-address'] = address;
  return {
    id: config.id,
    name: config.name,
    datacenter: config.datacenter,
    region: config.region,
    nodeClass: config.nodeClass,
    attributes,
    meta: { ...config.meta },
  };
}
