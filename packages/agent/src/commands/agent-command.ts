// `csiplug agent`: runs the agent in the foreground until SIGTERM or SIGINT.
// Tasks keep running when it exits (unless -stop-tasks-on-exit), so a new
// agent on the same data dir re-attaches to them.
import { ILogger, errorMessage, type Logger } from '@csiplug/core';
import * as fs from 'fs';
import { Agent } from '../agent';
import { HttpApi, type HttpApiOptions } from '../api';
import { devConfig, parseAgentConfig, type AgentConfig } from '../spec';
import { mountsUnder } from './host';

export interface AgentCommandOptions {
  configFile?: string;
  dev?: boolean;
  stopTasksOnExit?: boolean;
  /** Overrides for tests and the demo. */
  dataDir?: string;
  port?: number;
}

/** Where a command writes (the CLI's CliIo fits). */
export interface CommandIO {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
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
    allowedHosts: config.http.allowedHosts,
    allowedOrigins: config.http.allowedOrigins,
    limits: { maxConnections: config.limits.httpMaxConns, maxConnectionsPerClient: config.limits.httpMaxConnsPerClient, idleTimeoutMs: config.limits.httpIdleTimeout },
    logger,
  };
}

/** Starts an agent and its HTTP API; resolves with both, for embedding and tests. */
export async function startAgentWithApi(config: AgentConfig): Promise<{ agent: Agent; api: HttpApi; address: string }> {
  const agent = await Agent.start(config);
  let api: HttpApi;
  try {
    api = new HttpApi(agent, httpApiOptions(config, agent.container.resolve<Logger>(ILogger).child({ component: 'http-api' })));
    await api.listen();
    return { agent, api, address: api.url! };
  } catch (err) {
    await agent.shutdown({ stopTasks: false });
    throw err;
  }
}

/** Runs until a signal; returns the exit code. */
export async function runAgentCommand(options: AgentCommandOptions, io: CommandIO, signals: NodeJS.EventEmitter = process): Promise<number> {
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
  io.stdout.write(`==> csiplug agent started\n    API:      ${address}\n    Data dir: ${config.dataDir}\n    Node id:  ${config.nodeId}\n    State:    ${config.state.backend}\n`);
  await new Promise<void>((resolve) => {
    const stop = (sig: string) => {
      io.stdout.write(`==> caught ${sig}, shutting down (${config.stopTasksOnExit ? 'stopping tasks' : 'tasks keep running'})\n`);
      signals.removeListener('SIGTERM', onTerm);
      signals.removeListener('SIGINT', onInt);
      resolve();
    };
    const onTerm = () => stop('SIGTERM');
    const onInt = () => stop('SIGINT');
    signals.on('SIGTERM', onTerm);
    signals.on('SIGINT', onInt);
  });
  await api.close();
  await agent.shutdown();
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
