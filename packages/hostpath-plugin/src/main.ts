// Starts the hostpath plugin: optional start delay and start faults (fault
// switches), state dir, serveCsi on the endpoint, with the RPC faults of
// faults.ts wrapped around the handlers (and the garbage proxy in front of
// the gRPC server when garbage may be asked for), and the test-only request
// log outside them when asked for (request-log.ts).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type AsyncDisposable, type Logger, PinoLogger } from '@csiplug/core';
import { type CsiServer, parseEndpoint, serveCsi } from '@csiplug/csi';
import type { FaultSwitches, PluginConfig } from './config';
import {
  AttachmentStore,
  FaultSource,
  InjectedCrashError,
  type RpcFaults,
  readStartFault,
  serveGarbageProxy,
  serveNotGrpc,
  withControllerPublish,
  withFaults,
} from './faults';
import { LinuxMounter, type Mounter } from './mounter';
import { HostPathPlugin } from './plugin';
import { withRequestLog } from './request-log';
import { PublishedStore, VolumeStore } from './volume-store';

export interface RunningPlugin extends AsyncDisposable {
  /** The gRPC server; undefined when a start fault keeps the plugin from serving. */
  readonly server: CsiServer | undefined;
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

function rpcFaultsOf(f: FaultSwitches): RpcFaults {
  return {
    hangRpcs: f.hangRpcs,
    garbageRpcs: f.garbageRpcs,
    slowRpcs: f.slowRpcs,
    slowMs: f.slowMs,
    crashOnRpcs: f.crashOnRpcs,
    crashAfter: f.crashAfter,
    abnormalRpcs: f.abnormalRpcs,
    unimplementedRpcs: f.unimplementedRpcs,
  };
}

function anyRpcFault(f: RpcFaults): boolean {
  return (
    f.hangRpcs.length +
      f.garbageRpcs.length +
      f.slowRpcs.length +
      f.crashOnRpcs.length +
      f.abnormalRpcs.length +
      f.unimplementedRpcs.length >
      0 || f.crashAfter > 0
  );
}

export async function startPlugin(config: PluginConfig, options: StartOptions = {}): Promise<RunningPlugin> {
  const logger = options.logger ?? new PinoLogger({ level: config.logLevel, name: 'csiplug-hostpath' });
  const { faults } = config;
  const crash =
    options.crash ??
    (() => {
      // The logger may buffer; this line (stderr is synchronous on pipes and files) says why the task died.
      process.stderr.write('csiplug-hostpath: crashing on purpose (fault switch)\n');
      process.kill(process.pid, 'SIGKILL');
    });
  if (faults.startDelayMs > 0) {
    logger.info('start delay (fault switch)', { ms: faults.startDelayMs });
    await new Promise((r) => setTimeout(r, faults.startDelayMs));
  }
  const startFault = (faults.faultFile !== undefined ? readStartFault(faults.faultFile) : undefined) ?? faults.startFault;
  switch (startFault) {
    case 'crash':
      logger.warn('crashing at start (fault switch)');
      crash();
      throw new InjectedCrashError('the plugin crashed at start on purpose (fault switch)');
    case 'no-socket': {
      logger.warn('running without creating the socket (fault switch)', { endpoint: config.endpoint });
      const keepAlive = setInterval(() => undefined, 1 << 30);
      return { server: undefined, dispose: async () => clearInterval(keepAlive) };
    }
    case 'not-grpc': {
      logger.warn('serving something that is not gRPC on the socket (fault switch)', { endpoint: config.endpoint });
      const listener = await serveNotGrpc(config.endpoint);
      return { server: undefined, dispose: () => listener.dispose() };
    }
    case 'none':
      break;
  }
  // Resolved once, so the paths it compares with mountinfo are the kernel's.
  const stateDir = path.resolve(config.stateDir);
  fs.mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const store = new VolumeStore(fs.realpathSync(stateDir));
  await store.init();
  let readyAt = Number.POSITIVE_INFINITY;
  const published = new PublishedStore(store.stateDir, config.nodeId);
  const attachments = faults.controllerPublish ? new AttachmentStore(store.stateDir) : undefined;
  const plugin = new HostPathPlugin({
    config,
    store,
    published,
    attachments,
    mounter: options.mounter ?? new LinuxMounter(),
    logger,
    version: packageVersion(),
    readyAt: () => readyAt,
  });
  let handlers = plugin.handlers();
  if (attachments) handlers = withControllerPublish(handlers, store, attachments);
  const source = new FaultSource(rpcFaultsOf(faults), faults.faultFile, logger);
  if (source.dynamic || anyRpcFault(source.current())) handlers = withFaults(handlers, source, { logger, crash });
  // Outermost: what the caller sent is logged even when a fault then refuses it.
  if (faults.requestLog !== undefined) handlers = withRequestLog(handlers, faults.requestLog, logger);
  if (!source.dynamic && faults.garbageRpcs.length === 0) {
    const server = await serveCsi(config.endpoint, handlers, { logger });
    readyAt = Date.now() + faults.probeNotReadyMs;
    logger.info('listening', { endpoint: config.endpoint, mode: config.mode, nodeId: config.nodeId, stateDir: store.stateDir, faults });
    return { server, dispose: () => server.dispose() };
  }
  // Garbage may be asked for: the gRPC server listens beside the endpoint, a proxy on it.
  const inner = `${parseEndpoint(config.endpoint).socketPath}.inner`;
  const server = await serveCsi(`unix://${inner}`, handlers, { logger });
  const proxy = await serveGarbageProxy(config.endpoint, inner, (rpc) => source.current().garbageRpcs.includes(rpc), logger).catch(
    async (err: unknown) => {
      await server.dispose();
      throw err;
    },
  );
  readyAt = Date.now() + faults.probeNotReadyMs;
  logger.info('listening (behind the fault proxy)', {
    endpoint: config.endpoint,
    inner,
    mode: config.mode,
    nodeId: config.nodeId,
    stateDir: store.stateDir,
    faults,
  });
  return {
    server,
    dispose: async () => {
      await proxy.dispose();
      await server.dispose();
    },
  };
}
