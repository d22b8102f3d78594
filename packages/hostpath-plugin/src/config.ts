// Plugin configuration from flags and the environment (flags win).
import { ValidationError, assertPathSafeId } from '@csiplug/core';
import { START_FAULTS, checkRpcNames, type RpcFaults, type StartFault } from './faults';

/** The topology key of the default segments: the node id. */
export const TOPOLOGY_KEY = 'topology.hostpath.csiplug.io/node';

export type PluginMode = 'monolith' | 'node' | 'controller';

/** Test-only switches (faults.ts has the RPC faults' meanings); all off by default. */
export interface FaultSwitches extends RpcFaults {
  /** Wait this long before listening (ms). */
  startDelayMs: number;
  /** Probe answers ready=false for this long after listening (ms). */
  probeNotReadyMs: number;
  /** What happens at start instead of serving: no socket, a socket that is not gRPC, a crash. */
  startFault: StartFault;
  /** A JSON file of RpcFaults that replaces the RPC faults above whenever it changes. */
  faultFile?: string;
  /** The controller also offers ControllerPublishVolume (attachments in <state-dir>/attachments.json). */
  controllerPublish: boolean;
  /** Test only: append every request received, secrets in the clear, to this file (request-log.ts). */
  requestLog?: string;
}

export interface PluginConfig {
  endpoint: string;
  nodeId: string;
  /** This node's topology segments (NodeGetInfo, every volume's accessible_topology); default { TOPOLOGY_KEY: node id }. */
  topology: Record<string, string>;
  /** What NodeGetInfo reports as max_volumes_per_node; 0 = no limit. */
  maxVolumesPerNode: number;
  stateDir: string;
  mode: PluginMode;
  name: string;
  logLevel: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'silent';
  faults: FaultSwitches;
}

export const ENV = {
  endpoint: 'CSI_ENDPOINT',
  nodeId: 'CSIPLUG_HOSTPATH_NODE_ID',
  topology: 'CSIPLUG_HOSTPATH_TOPOLOGY',
  maxVolumesPerNode: 'CSIPLUG_HOSTPATH_MAX_VOLUMES_PER_NODE',
  stateDir: 'CSIPLUG_HOSTPATH_STATE_DIR',
  mode: 'CSIPLUG_HOSTPATH_MODE',
  logLevel: 'CSIPLUG_HOSTPATH_LOG_LEVEL',
  startDelayMs: 'CSIPLUG_HOSTPATH_START_DELAY_MS',
  probeNotReadyMs: 'CSIPLUG_HOSTPATH_PROBE_NOT_READY_MS',
  hangRpc: 'CSIPLUG_HOSTPATH_HANG_RPC',
  crashAfter: 'CSIPLUG_HOSTPATH_CRASH_AFTER',
  startFault: 'CSIPLUG_HOSTPATH_START_FAULT',
  garbageRpc: 'CSIPLUG_HOSTPATH_GARBAGE_RPC',
  slowRpc: 'CSIPLUG_HOSTPATH_SLOW_RPC',
  slowMs: 'CSIPLUG_HOSTPATH_SLOW_MS',
  crashOnRpc: 'CSIPLUG_HOSTPATH_CRASH_ON_RPC',
  abnormalRpc: 'CSIPLUG_HOSTPATH_ABNORMAL_RPC',
  unimplementedRpc: 'CSIPLUG_HOSTPATH_UNIMPLEMENTED_RPC',
  faultFile: 'CSIPLUG_HOSTPATH_FAULT_FILE',
  controllerPublish: 'CSIPLUG_HOSTPATH_CONTROLLER_PUBLISH',
  requestLog: 'CSIPLUG_HOSTPATH_REQUEST_LOG',
} as const;

export const USAGE = `usage: csiplug-hostpath --endpoint unix:///PATH --node-id ID --state-dir DIR [--mode monolith|node|controller]
  --endpoint          plugin socket (or CSI_ENDPOINT)
  --node-id           node id reported by NodeGetInfo (or ${ENV.nodeId})
  --topology K=V[,K=V]      this node's topology segments, default ${TOPOLOGY_KEY}=<node id> (or ${ENV.topology})
  --max-volumes-per-node N  max_volumes_per_node for NodeGetInfo, default 0 = no limit (or ${ENV.maxVolumesPerNode})
  --state-dir         where volumes and their metadata live (or ${ENV.stateDir})
  --mode              services to run, default monolith (or ${ENV.mode})
  --name              plugin name, default hostpath.csiplug.io
  --log-level         trace|debug|info|warn|error|silent, default info (or ${ENV.logLevel})
fault switches, for tests:
  --start-delay-ms N      wait N ms before listening (${ENV.startDelayMs})
  --probe-not-ready-ms N  Probe reports not ready for N ms after listening (${ENV.probeNotReadyMs})
  --hang-rpc A[,B]        these RPCs never answer (${ENV.hangRpc})
  --crash-after N         serve N calls, then die by SIGKILL on the next (${ENV.crashAfter})
  --start-fault F         no-socket | not-grpc | crash: instead of serving (${ENV.startFault})
  --garbage-rpc A[,B]     these RPCs answer a message nobody can decode (${ENV.garbageRpc})
  --slow-rpc A[,B]        these RPCs answer --slow-ms late (${ENV.slowRpc})
  --slow-ms N             how late, in ms (${ENV.slowMs})
  --crash-on-rpc A[,B]    die by SIGKILL when one of these RPCs is called (${ENV.crashOnRpc})
  --abnormal-rpc A[,B]    these RPCs report the volume condition abnormal, healthy or not (${ENV.abnormalRpc})
  --unimplemented-rpc A[,B]  these RPCs answer UNIMPLEMENTED, advertised or not (${ENV.unimplementedRpc})
  --fault-file PATH       JSON of the RPC faults, read again whenever it changes (${ENV.faultFile})
  --controller-publish B  true: offer ControllerPublishVolume too (${ENV.controllerPublish})
  --request-log PATH      append each request received to PATH, secrets in the clear: tests only (${ENV.requestLog})`;

const FLAGS: Record<string, string> = {
  '--endpoint': 'endpoint',
  '--node-id': 'nodeId',
  '--topology': 'topology',
  '--max-volumes-per-node': 'maxVolumesPerNode',
  '--state-dir': 'stateDir',
  '--mode': 'mode',
  '--name': 'name',
  '--log-level': 'logLevel',
  '--start-delay-ms': 'startDelayMs',
  '--probe-not-ready-ms': 'probeNotReadyMs',
  '--hang-rpc': 'hangRpc',
  '--crash-after': 'crashAfter',
  '--start-fault': 'startFault',
  '--garbage-rpc': 'garbageRpc',
  '--slow-rpc': 'slowRpc',
  '--slow-ms': 'slowMs',
  '--crash-on-rpc': 'crashOnRpc',
  '--abnormal-rpc': 'abnormalRpc',
  '--unimplemented-rpc': 'unimplementedRpc',
  '--fault-file': 'faultFile',
  '--controller-publish': 'controllerPublish',
  '--request-log': 'requestLog',
};

function startFault(v: string | undefined): StartFault {
  const f = (v || 'none') as StartFault;
  if (!START_FAULTS.includes(f))
    throw new ValidationError(`--start-fault must be one of ${START_FAULTS.join(', ')}, got "${v}"`, 'startFault');
  return f;
}

function bool(v: string | undefined, what: string): boolean {
  if (v === undefined || v === '' || v === 'false') return false;
  if (v === 'true') return true;
  throw new ValidationError(`${what} must be true or false, got "${v}"`, what);
}

function nonNegativeInt(v: string | undefined, what: string): number {
  if (v === undefined || v === '') return 0;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new ValidationError(`${what} must be a non-negative integer, got "${v}"`, what);
  return n;
}

// CSI spec, Topology: a key is an optional DNS-subdomain prefix (lower case,
// 63 characters or less) and "/", then a name; names and values are 63
// characters or less, begin and end alphanumeric, with - _ . or
// alphanumerics between; keys are case-insensitive; every key with a prefix
// has the same prefix.
const TOPOLOGY_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Parses `key=value[,key=value]` into topology segments, checked as the CSI spec says; errors name `flag`. */
export function parseTopology(v: string, flag = '--topology'): Record<string, string> {
  const out: Record<string, string> = {};
  const seen = new Map<string, string>();
  const prefixes = new Set<string>();
  const pairs = v.split(',').map((s) => s.trim());
  if (pairs.every((p) => p === '')) throw new ValidationError(`${flag} needs at least one key=value, got "${v}"`, 'topology');
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new ValidationError(`${flag}: "${pair}" is not key=value (give ${flag} key=value[,key=value])`, 'topology');
    const key = pair.slice(0, eq).trim();
    const value = pair.slice(eq + 1).trim();
    const slash = key.indexOf('/');
    const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
    const name = slash >= 0 ? key.slice(slash + 1) : key;
    if (prefix !== undefined && (prefix.length === 0 || prefix.length > 63 || !prefix.split('.').every((l) => DNS_LABEL.test(l)))) {
      throw new ValidationError(
        `${flag}: the prefix "${prefix}" of key "${key}" must be a lower-case DNS subdomain of 63 characters or less`,
        'topology',
      );
    }
    if (!TOPOLOGY_NAME.test(name)) {
      throw new ValidationError(
        `${flag}: the name "${name}" of key "${key}" must be 1-63 characters, begin and end with a letter or digit, with - _ . letters or digits between`,
        'topology',
      );
    }
    if (!TOPOLOGY_NAME.test(value)) {
      throw new ValidationError(
        `${flag}: the value "${value}" of key "${key}" must be 1-63 characters, begin and end with a letter or digit, with - _ . letters or digits between`,
        'topology',
      );
    }
    const folded = key.toLowerCase();
    if (seen.has(folded))
      throw new ValidationError(
        `${flag}: key "${key}" is given twice (keys are case-insensitive; first as "${seen.get(folded)}")`,
        'topology',
      );
    seen.set(folded, key);
    if (prefix !== undefined) prefixes.add(prefix);
    out[key] = value;
  }
  if (prefixes.size > 1)
    throw new ValidationError(
      `${flag}: every key must have the same prefix, got ${[...prefixes].map((p) => `"${p}"`).join(', ')}`,
      'topology',
    );
  if (prefixes.size === 1 && Object.keys(out).some((k) => !k.includes('/'))) {
    throw new ValidationError(`${flag}: every key must have the same prefix "${[...prefixes][0]}/" (some have none)`, 'topology');
  }
  return out;
}

function maxVolumes(v: string | undefined): number {
  if (v === undefined || v === '') return 0;
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n))
    throw new ValidationError(`--max-volumes-per-node must be a non-negative integer (0 = no limit), got "${v}"`, 'maxVolumesPerNode');
  return n;
}

function rpcList(v: string | undefined, what: string): string[] {
  const names = (v ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  checkRpcNames(names, what);
  return names;
}

export function parseConfig(argv: string[], env: NodeJS.ProcessEnv = process.env): PluginConfig {
  const given: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const eq = arg.indexOf('=');
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const key = FLAGS[flag];
    if (!key) throw new ValidationError(`unknown argument "${arg}"\n${USAGE}`, arg);
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined) throw new ValidationError(`${flag} needs a value\n${USAGE}`, flag);
    given[key] = value;
  }
  const pick = (key: keyof typeof ENV) => given[key] ?? env[ENV[key]];
  const endpoint = pick('endpoint');
  const nodeId = pick('nodeId');
  const stateDir = pick('stateDir');
  if (!endpoint) throw new ValidationError(`--endpoint (or CSI_ENDPOINT) is required\n${USAGE}`, 'endpoint');
  if (!nodeId) throw new ValidationError(`--node-id is required\n${USAGE}`, 'nodeId');
  if (!stateDir) throw new ValidationError(`--state-dir is required\n${USAGE}`, 'stateDir');
  assertPathSafeId(nodeId, 'node id');
  const mode = (pick('mode') ?? 'monolith') as PluginMode;
  if (!['monolith', 'node', 'controller'].includes(mode))
    throw new ValidationError(`--mode must be monolith, node or controller, got "${mode}"`, 'mode');
  const logLevel = (pick('logLevel') ?? 'info') as PluginConfig['logLevel'];
  if (!['trace', 'debug', 'info', 'warn', 'error', 'silent'].includes(logLevel))
    throw new ValidationError(`--log-level: unknown level "${logLevel}"`, 'logLevel');
  const slowRpcs = rpcList(pick('slowRpc'), '--slow-rpc');
  const slowMs = nonNegativeInt(pick('slowMs'), 'slow time');
  if (slowRpcs.length && slowMs === 0)
    throw new ValidationError(`--slow-rpc ${slowRpcs.join(',')} needs --slow-ms (how late, in ms)`, 'slowMs');
  // An empty environment variable counts as unset; an empty flag is refused.
  const topologyText = given.topology ?? (env[ENV.topology] || undefined);
  return {
    endpoint,
    nodeId,
    topology: topologyText === undefined ? { [TOPOLOGY_KEY]: nodeId } : parseTopology(topologyText),
    maxVolumesPerNode: maxVolumes(pick('maxVolumesPerNode')),
    stateDir,
    mode,
    name: given.name ?? 'hostpath.csiplug.io',
    logLevel,
    faults: {
      startDelayMs: nonNegativeInt(pick('startDelayMs'), 'start delay'),
      probeNotReadyMs: nonNegativeInt(pick('probeNotReadyMs'), 'probe not-ready time'),
      hangRpcs: rpcList(pick('hangRpc'), '--hang-rpc'),
      crashAfter: nonNegativeInt(pick('crashAfter'), 'crash-after count'),
      startFault: startFault(pick('startFault')),
      garbageRpcs: rpcList(pick('garbageRpc'), '--garbage-rpc'),
      slowRpcs,
      slowMs,
      crashOnRpcs: rpcList(pick('crashOnRpc'), '--crash-on-rpc'),
      abnormalRpcs: rpcList(pick('abnormalRpc'), '--abnormal-rpc'),
      unimplementedRpcs: rpcList(pick('unimplementedRpc'), '--unimplemented-rpc'),
      ...(pick('faultFile') ? { faultFile: pick('faultFile') } : {}),
      controllerPublish: bool(pick('controllerPublish'), '--controller-publish'),
      ...(pick('requestLog') ? { requestLog: pick('requestLog') } : {}),
    },
  };
}
