// Plugin configuration from flags and the environment (flags win).
import { ValidationError, assertPathSafeId } from '@csiplug/core';

export type PluginMode = 'monolith' | 'node' | 'controller';

export interface FaultSwitches {
  /** Wait this long before listening (ms). */
  startDelayMs: number;
  /** Probe answers ready=false for this long after listening (ms). */
  probeNotReadyMs: number;
  /** RPC names (e.g. "NodeGetInfo") that never answer until the caller gives up. */
  hangRpcs: string[];
  /** Serve this many calls, then die with SIGKILL on the next one (socket left behind). 0 = never. */
  crashAfter: number;
}

export interface PluginConfig {
  endpoint: string;
  nodeId: string;
  stateDir: string;
  mode: PluginMode;
  name: string;
  logLevel: 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'silent';
  faults: FaultSwitches;
}

export const ENV = {
  endpoint: 'CSI_ENDPOINT',
  nodeId: 'CSIPLUG_HOSTPATH_NODE_ID',
  stateDir: 'CSIPLUG_HOSTPATH_STATE_DIR',
  mode: 'CSIPLUG_HOSTPATH_MODE',
  logLevel: 'CSIPLUG_HOSTPATH_LOG_LEVEL',
  startDelayMs: 'CSIPLUG_HOSTPATH_START_DELAY_MS',
  probeNotReadyMs: 'CSIPLUG_HOSTPATH_PROBE_NOT_READY_MS',
  hangRpc: 'CSIPLUG_HOSTPATH_HANG_RPC',
  crashAfter: 'CSIPLUG_HOSTPATH_CRASH_AFTER',
} as const;

export const USAGE = `usage: csiplug-hostpath --endpoint unix:///PATH --node-id ID --state-dir DIR [--mode monolith|node|controller]
  --endpoint          plugin socket (or CSI_ENDPOINT)
  --node-id           node id reported by NodeGetInfo (or ${ENV.nodeId})
  --state-dir         where volumes and their metadata live (or ${ENV.stateDir})
  --mode              services to run, default monolith (or ${ENV.mode})
  --name              plugin name, default hostpath.csiplug.io
  --log-level         trace|debug|info|warn|error|silent, default info (or ${ENV.logLevel})
fault switches, for tests:
  --start-delay-ms N      wait N ms before listening (${ENV.startDelayMs})
  --probe-not-ready-ms N  Probe reports not ready for N ms after listening (${ENV.probeNotReadyMs})
  --hang-rpc A[,B]        these RPCs never answer (${ENV.hangRpc})
  --crash-after N         serve N calls, then die by SIGKILL on the next (${ENV.crashAfter})`;

const FLAGS: Record<string, string> = {
  '--endpoint': 'endpoint',
  '--node-id': 'nodeId',
  '--state-dir': 'stateDir',
  '--mode': 'mode',
  '--name': 'name',
  '--log-level': 'logLevel',
  '--start-delay-ms': 'startDelayMs',
  '--probe-not-ready-ms': 'probeNotReadyMs',
  '--hang-rpc': 'hangRpc',
  '--crash-after': 'crashAfter',
};

function nonNegativeInt(v: string | undefined, what: string): number {
  if (v === undefined || v === '') return 0;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new ValidationError(`${what} must be a non-negative integer, got "${v}"`, what);
  return n;
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
  if (!['monolith', 'node', 'controller'].includes(mode)) throw new ValidationError(`--mode must be monolith, node or controller, got "${mode}"`, 'mode');
  const logLevel = (pick('logLevel') ?? 'info') as PluginConfig['logLevel'];
  if (!['trace', 'debug', 'info', 'warn', 'error', 'silent'].includes(logLevel)) throw new ValidationError(`--log-level: unknown level "${logLevel}"`, 'logLevel');
  return {
    endpoint,
    nodeId,
    stateDir,
    mode,
    name: given.name ?? 'hostpath.csiplug.io',
    logLevel,
    faults: {
      startDelayMs: nonNegativeInt(pick('startDelayMs'), 'start delay'),
      probeNotReadyMs: nonNegativeInt(pick('probeNotReadyMs'), 'probe not-ready time'),
      hangRpcs: (pick('hangRpc') ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
      crashAfter: nonNegativeInt(pick('crashAfter'), 'crash-after count'),
    },
  };
}
