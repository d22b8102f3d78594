// Starts the hostpath plugin: optional start delay (fault switch), state dir,
// serveCsi on the endpoint, and the call-counting fault switches.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { AsyncDisposable, Logger, PinoLogger } from '@csiplug/core';
import { CSI_SERVICES, CsiServer, CsiServerHandlers, CsiServiceKey, csiPackageDefinition, csiStatus, serveCsi } from '@csiplug/csi';
import type { PluginConfig } from './config';
import { LinuxMounter, Mounter } from './mounter';
import { HostPathPlugin } from './plugin';
import { VolumeStore } from './volume-store';

export interface RunningPlugin extends AsyncDisposable {
  readonly server: CsiServer;
  /** Stops serving and removes the socket. */
  dispose(): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  mounter?: Mounter;
  /** What "crash" does; the CLI kills the process with SIGKILL. */
  crash?: () => void;
}

function packageVersion(): string {
  try {
    return (JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return '0.0.0';
  }
}

/** Wraps the RPCs named by the hang switch so they answer only when the caller gives up. */
function withHangs(handlers: CsiServerHandlers, hang: string[]): CsiServerHandlers {
  if (!hang.length) return handlers;
  const hung = (rpc: string) => (_req: unknown, ctx: { signal: AbortSignal }) =>
    new Promise((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(csiStatus.aborted(`${rpc} was hung on purpose (fault switch)`)), { once: true }));
  const out = { ...handlers } as Record<CsiServiceKey, Record<string, unknown> | undefined>;
  for (const svc of Object.keys(CSI_SERVICES) as CsiServiceKey[]) {
    for (const rpc of hang) {
      if (!(rpc in (csiPackageDefinition()[CSI_SERVICES[svc]] as object))) continue;
      out[svc] = { ...(out[svc] ?? {}), [rpc]: hung(rpc) };
    }
  }
  return out as unknown as CsiServerHandlers;
}

export async function startPlugin(config: PluginConfig, options: StartOptions = {}): Promise<RunningPlugin> {
  const logger = options.logger ?? new PinoLogger({ level: config.logLevel, name: 'csiplug-hostpath' });
  const { faults } = config;
  if (faults.startDelayMs > 0) {
    logger.info('start delay (fault switch)', { ms: faults.startDelayMs });
    await new Promise((r) => setTimeout(r, faults.startDelayMs));
  }
  // Resolved once, so the paths it compares with mountinfo are the kernel's.
  const stateDir = path.resolve(config.stateDir);
  fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const store = new VolumeStore(fs.realpathSync(stateDir));
  await store.init();
  let readyAt = Number.POSITIVE_INFINITY;
  const plugin = new HostPathPlugin({ config, store, mounter: options.mounter ?? new LinuxMounter(), logger, version: packageVersion(), readyAt: () => readyAt });
  let calls = 0;
  const crash = options.crash ?? (() => process.kill(process.pid, 'SIGKILL'));
  const server = await serveCsi(config.endpoint, withHangs(plugin.handlers(), faults.hangRpcs), {
    logger,
    beforeCall: (rpc) => {
      calls++;
      if (faults.crashAfter > 0 && calls > faults.crashAfter) {
        logger.warn('crashing on purpose (fault switch)', { rpc, calls });
        crash();
        throw csiStatus.unavailable('the plugin crashed on purpose (fault switch)');
      }
    },
  });
  readyAt = Date.now() + faults.probeNotReadyMs;
  logger.info('listening', { endpoint: config.endpoint, mode: config.mode, nodeId: config.nodeId, stateDir: store.stateDir, faults });
  return { server, dispose: () => server.dispose() };
}
