// `csiplug agent`: runs the agent in the foreground until SIGTERM or SIGINT.
// Tasks keep running when it exits (unless -stop-tasks-on-exit, or the memory
// state backend), so a new agent on the same data dir re-attaches to them.
// -reconcile-orphans cleans up at start what the state does not know
// (orphans.ts); without it the agent only warns about each. SIGHUP reads the
// config file again and applies its reloadable parts (log level, ACL token,
// timeouts), logging what changed, and renders the running tasks' templates
// again; it never stops the agent.
import { DefaultTimeoutPolicy, ILogger, ITimeoutPolicy, PinoLogger, errorMessage, type Logger } from '@csiplug/core';
import * as fs from 'fs';
import { Agent } from '../agent';
import { HttpApi, type HttpApiOptions } from '@csiplug/api';
import { devConfig, parseAgentConfig, type AgentConfig } from '@csiplug/jobspec';
import { mountsUnder } from './host';

export interface AgentCommandOptions {
  configFile?: string;
  dev?: boolean;
  stopTasksOnExit?: boolean;
  /** Clean up orphan executors, mounts and alloc dirs at start (as `reconcile_orphans = true`). */
  reconcileOrphans?: boolean;
  /** -log-level and -log-json: override the config file's log_level and log_json. */
  logLevel?: AgentConfig['logLevel'];
  logJson?: boolean;
  /** Overrides for tests and the demo. */
  dataDir?: string;
  port?: number;
  /** How long shutdown may take after the signal before the process leaves anyway. Default 30 s. */
  shutdownTimeoutMs?: number;
  /** Ends the process when shutdown cannot finish (default process.exit); tests pass their own. */
  forceExit?: (code: number) => void;
}

export const SHUTDOWN_TIMEOUT_MS = 30_000;

/** Where a command writes (the CLI's CliIo fits). */
export interface CommandIO {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
}

/** The name of the next SIGTERM or SIGINT; cancel() stops listening. */
function nextSignal(signals: NodeJS.EventEmitter): { promise: Promise<'SIGTERM' | 'SIGINT'>; cancel(): void } {
  let cancel = () => {};
  const promise = new Promise<'SIGTERM' | 'SIGINT'>((resolve) => {
    const onTerm = () => done('SIGTERM');
    const onInt = () => done('SIGINT');
    cancel = () => {
      signals.removeListener('SIGTERM', onTerm);
      signals.removeListener('SIGINT', onInt);
    };
    const done = (sig: 'SIGTERM' | 'SIGINT') => {
      cancel();
      resolve(sig);
    };
    signals.on('SIGTERM', onTerm);
    signals.on('SIGINT', onInt);
  });
  return { promise, cancel };
}

export async function loadAgentConfig(options: AgentCommandOptions): Promise<AgentConfig> {
  let config: AgentConfig;
  if (options.configFile) {
    let text: string;
    try {
      text = fs.readFileSync(options.configFile, 'utf8');
    } catch (err) {
      throw new Error(`cannot read config file ${options.configFile}: ${errorMessage(err)}`);
    }
    config = await parseAgentConfig(text, options.configFile, { dev: options.dev });
  } else if (options.dev) {
    config = devConfig();
  } else {
    throw new Error('give -config FILE, or -dev for a throwaway agent');
  }
  if (options.dataDir) config = { ...config, dataDir: options.dataDir };
  if (options.port !== undefined) config = { ...config, port: options.port };
  if (options.stopTasksOnExit) config = { ...config, stopTasksOnExit: true };
  if (options.reconcileOrphans) config = { ...config, reconcileOrphans: true };
  if (options.logLevel) config = { ...config, logLevel: options.logLevel };
  if (options.logJson) config = { ...config, logJson: true };
  return config;
}

/** The HTTP API's options from the agent config. */
export function httpApiOptions(config: AgentConfig, logger: Logger): HttpApiOptions {
  return {
    bindAddr: config.bindAddr,
    port: config.port,
    aclToken: config.acl.token,
    insecureAllowPublic: config.acl.insecureAllowPublic,
    tls: config.tls,
    // Other agents name this one as `cluster { advertise }` says, on its port (a NAT in between may map another).
    allowedHosts: [...config.http.allowedHosts, ...(config.cluster?.advertise ? [new URL(config.cluster.advertise).hostname] : [])],
    allowedOrigins: config.http.allowedOrigins,
    limits: {
      maxConnections: config.limits.httpMaxConns,
      maxConnectionsPerClient: config.limits.httpMaxConnsPerClient,
      idleTimeoutMs: config.limits.httpIdleTimeout,
    },
    logger,
  };
}

/** Config keys a SIGHUP applies while the agent runs; any other change waits for the next start. */
const RELOADABLE = ['logLevel', 'acl', 'timeouts'] as const;

/**
 * Reads the config file again and applies its reloadable parts — the log
 * level (every logger at once), the ACL token (the API's, and whether new
 * isolated tasks may have the host's network), the timeouts — then logs what
 * changed and what needs a restart. A file that cannot be read or checked,
 * or a token the bind address cannot go without, changes nothing. Never
 * throws. Resolves with the config now in force. Every SIGHUP also renders
 * the running tasks' templates again (TaskRunner.templates), in the background.
 */
export async function reloadAgentConfig(
  options: AgentCommandOptions,
  current: AgentConfig,
  agent: Agent,
  api: HttpApi,
  stopping: () => boolean = () => false,
): Promise<AgentConfig> {
  // Resolved before any await: a shutdown meanwhile disposes the container.
  const root = agent.container.resolve<Logger>(ILogger);
  const policy = agent.container.resolve(ITimeoutPolicy);
  const log = root.child({ component: 'agent' });
  // Templates are rendered again on every SIGHUP, config file or not (a source file may have changed); a failure is the task's event.
  if (!stopping())
    void agent.reloadTemplates().catch((err: unknown) => log.error('SIGHUP: re-rendering templates failed', { error: errorMessage(err) }));
  if (!options.configFile) {
    log.warn('SIGHUP: the agent has no config file to read again (it started with -dev); nothing changed');
    return current;
  }
  let next: AgentConfig;
  try {
    next = await loadAgentConfig(options);
  } catch (err) {
    log.error('SIGHUP: the config file could not be read again; nothing changed, the agent runs on as it was', {
      file: options.configFile,
      error: errorMessage(err),
    });
    return current;
  }
  // The agent began to stop while the file was read: nothing is applied to what is going away.
  if (stopping()) return current;
  const changed: string[] = [];
  let applied: AgentConfig = current;
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  if (next.logLevel !== current.logLevel) {
    if (root instanceof PinoLogger) {
      root.setLevel(next.logLevel);
      changed.push(`log_level ${current.logLevel} → ${next.logLevel}`);
      applied = { ...applied, logLevel: next.logLevel };
    } else log.warn("SIGHUP: this agent's logger cannot change its level while running; log_level takes effect at the next start");
  }
  // The token reloads; insecure_allow_public waits for a restart (the API checked its bind with it).
  if (next.acl.token !== current.acl.token) {
    try {
      api.setAclToken(next.acl.token);
      agent.apiTokenChanged(next.acl.token !== undefined);
      changed.push(
        next.acl.token === undefined ? 'acl token removed' : current.acl.token === undefined ? 'acl token set' : 'acl token changed',
      );
      applied = { ...applied, acl: { ...current.acl, ...(next.acl.token !== undefined ? { token: next.acl.token } : {}) } };
      if (next.acl.token === undefined) delete (applied.acl as { token?: string }).token;
    } catch (err) {
      log.error('SIGHUP: the new ACL settings are refused; the API keeps the old ones', { error: errorMessage(err) });
    }
  }
  if (!same(next.timeouts, current.timeouts)) {
    if (policy instanceof DefaultTimeoutPolicy) {
      policy.update(next.timeouts);
      changed.push(
        `timeouts (${Object.keys(next.timeouts)
          .filter(
            (k) =>
              !same((next.timeouts as unknown as Record<string, unknown>)[k], (current.timeouts as unknown as Record<string, unknown>)[k]),
          )
          .join(', ')})`,
      );
      applied = { ...applied, timeouts: next.timeouts };
    } else log.warn("SIGHUP: this agent's timeout policy cannot change while running; timeouts take effect at the next start");
  }
  const needRestart: string[] = (Object.keys(next) as (keyof AgentConfig)[]).filter(
    (k) => !(RELOADABLE as readonly string[]).includes(k) && !same(next[k], current[k]),
  );
  if (next.acl.insecureAllowPublic !== current.acl.insecureAllowPublic) needRestart.push('acl.insecureAllowPublic');
  if (needRestart.length) log.warn('SIGHUP: these settings changed and take effect at the next start', { settings: needRestart });
  log.info(changed.length ? 'SIGHUP: config reloaded' : 'SIGHUP: config read again; nothing reloadable changed', {
    file: options.configFile,
    changed,
  });
  return applied;
}

/** Starts an agent and its HTTP API; resolves with both, for embedding and tests. */
export async function startAgentWithApi(config: AgentConfig): Promise<{ agent: Agent; api: HttpApi; address: string }> {
  const agent = await Agent.start(config);
  let api: HttpApi;
  try {
    api = new HttpApi(agent, {
      ...httpApiOptions(config, agent.container.resolve<Logger>(ILogger).child({ component: 'http-api' })),
      metrics: agent.metrics,
    });
    await api.listen();
    return { agent, api, address: api.url! };
  } catch (err) {
    await agent.dispose({ stopTasks: false });
    throw err;
  }
}

/** Runs until a signal; returns the exit code. */
export async function runAgentCommand(
  options: AgentCommandOptions,
  io: CommandIO,
  signals: NodeJS.EventEmitter = process,
): Promise<number> {
  // SIGHUP never ends the agent (Node's default for it would): taken from the start, ignored until the agent is up and once it is stopping.
  let onHup: () => void = () => undefined;
  const hup = () => onHup();
  signals.on('SIGHUP', hup);
  try {
    return await runAgent(options, io, signals, (handler) => (onHup = handler));
  } finally {
    signals.removeListener('SIGHUP', hup);
  }
}

async function runAgent(
  options: AgentCommandOptions,
  io: CommandIO,
  signals: NodeJS.EventEmitter,
  setHupHandler: (handler: () => void) => void,
): Promise<number> {
  let config: AgentConfig;
  let started: Awaited<ReturnType<typeof startAgentWithApi>>;
  try {
    config = await loadAgentConfig(options);
    started = await startAgentWithApi(config);
  } catch (err) {
    io.stderr.write(`Error starting agent: ${errorMessage(err)}\n`);
    return 1;
  }
  const { agent, api, address } = started;
  io.stdout.write(
    `==> csiplug agent started\n    API:      ${address}\n    Data dir: ${config.dataDir}\n    Node id:  ${config.nodeId}\n    State:    ${config.state.backend}\n`,
  );
  // SIGHUP: reload what can change while running — one reload at a time, and one more after it when another SIGHUP came meanwhile.
  let current = config;
  let reloading = false;
  let reloadAgain = false;
  let shuttingDown = false;
  const reload = (): void => {
    if (shuttingDown) return;
    if (reloading) {
      reloadAgain = true;
      return;
    }
    reloading = true;
    reloadAgentConfig(options, current, agent, api, () => shuttingDown)
      .then((next) => {
        current = next;
      })
      .catch((err: unknown) => io.stderr.write(`==> reloading the config failed: ${errorMessage(err)}\n`))
      .finally(() => {
        reloading = false;
        if (reloadAgain && !shuttingDown) {
          reloadAgain = false;
          reload();
        }
      });
  };
  setHupHandler(reload);
  const first = await nextSignal(signals).promise;
  shuttingDown = true;
  io.stdout.write(`==> caught ${first}, shutting down (${config.stopTasksOnExit ? 'stopping tasks' : 'tasks keep running'})\n`);
  // One signal is enough: the shutdown finishes, or gives up after its limit
  // (tasks keep running either way, and the next agent re-attaches), or a
  // second signal ends it at once.
  const limitMs = options.shutdownTimeoutMs ?? SHUTDOWN_TIMEOUT_MS;
  let timer: NodeJS.Timeout | undefined;
  const again = nextSignal(signals);
  const stopping = (async () => {
    await api.dispose().catch((err: unknown) => io.stderr.write(`==> closing the HTTP API failed: ${errorMessage(err)}\n`));
    await agent.dispose();
    return 'done' as const;
  })();
  const outcome = await Promise.race([
    stopping.catch((err: unknown) => {
      io.stderr.write(`==> shutdown failed: ${errorMessage(err)}\n`);
      return 'failed' as const;
    }),
    new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), limitMs))),
    again.promise,
  ]);
  clearTimeout(timer);
  again.cancel();
  if (outcome !== 'done') {
    const why =
      outcome === 'failed'
        ? 'it failed'
        : outcome === 'timeout'
          ? `it did not finish within ${limitMs / 1000} s`
          : `caught ${outcome} again`;
    io.stderr.write(`==> leaving now: ${why}; running tasks are left for the next agent\n`);
    (options.forceExit ?? ((code: number) => process.exit(code)))(1);
    return 1;
  }
  if (config.dev && config.stopTasksOnExit) {
    // A -dev agent's data dir is throwaway; keep it only if something is
    // still mounted below it (never delete through a live mount).
    const left = mountsUnder(config.dataDir);
    if (left.length === 0) fs.rmSync(config.dataDir, { recursive: true, force: true });
    else io.stderr.write(`==> keeping ${config.dataDir}: still mounted below it: ${left.join(', ')}\n`);
  }
  io.stdout.write('==> csiplug agent stopped\n');
  return 0;
}
