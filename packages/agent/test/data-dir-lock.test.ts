// One agent per data dir, whatever the state backends: every agent takes
// <data_dir>/agent.lock before it opens its state, so a second agent fails
// fast with DataDirInUseError — in one process (two Agent.start calls) and
// across real processes (a memory agent, then a sqlite one). The lock goes
// with a shutdown, a failed start, or the death of its process.
import { MemoryLogger } from '@csiplug/core';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Agent } from '../src/agent';
import { DataDirInUseError } from '../src/data-dir';
import { devConfig, type AgentConfig } from '@csiplug/jobspec';
import { AgentHarness, BIN, freePort } from './support/agent-process';

type Backend = AgentConfig['state']['backend'];

function config(dataDir: string, backend: Backend): AgentConfig {
  return { ...devConfig(), dataDir, port: 0, state: { backend } };
}

async function startFails(dataDir: string, backend: Backend): Promise<Error> {
  let agent: Agent | undefined;
  try {
    agent = await Agent.start(config(dataDir, backend), { logger: new MemoryLogger() });
  } catch (err) {
    return err as Error;
  }
  await agent.dispose({ stopTasks: true });
  throw new Error(`a ${backend} agent started on ${dataDir}, which another agent holds`);
}

function expectInUse(err: Error, dataDir: string): void {
  expect(err).toBeInstanceOf(DataDirInUseError);
  expect(err.message).toContain(`data dir ${dataDir} is in use: another csiplug agent holds its lock`);
}

describe('one agent per data dir', () => {
  let dataDir: string;
  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-lock-'));
  });
  afterEach(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  const combos: [Backend, Backend][] = [
    ['memory', 'sqlite'],
    ['sqlite', 'memory'],
    ['sqlite', 'sqlite'],
    ['memory', 'memory'],
  ];
  it.each(combos)('in one process: a %s agent keeps a %s agent out until it shuts down', async (first, second) => {
    const holder = await Agent.start(config(dataDir, first), { logger: new MemoryLogger() });
    try {
      expectInUse(await startFails(dataDir, second), dataDir);
    } finally {
      await holder.dispose({ stopTasks: true });
    }
    const next = await Agent.start(config(dataDir, second), { logger: new MemoryLogger() });
    await next.dispose({ stopTasks: true });
  });

  it('a failed start lets go of the lock', async () => {
    fs.writeFileSync(path.join(dataDir, 'state.db'), 'not a SQLite file');
    // The state module's start fails; the error names the module and carries the state's own.
    await expect(Agent.start(config(dataDir, 'sqlite'), { logger: new MemoryLogger() })).rejects.toMatchObject({
      code: 'EMODULE_START',
      module: 'state',
      cause: expect.objectContaining({ code: 'ErrInvalid' }),
    });
    const next = await Agent.start(config(dataDir, 'memory'), { logger: new MemoryLogger() });
    await next.dispose({ stopTasks: true });
  });
});

describe('one agent per data dir, across processes', () => {
  jest.setTimeout(120_000);
  let h: AgentHarness;
  beforeEach(() => {
    h = new AgentHarness('state {\n  backend = "memory"\n}');
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('a running memory agent keeps a sqlite agent out, in another process and in this one, until it dies', async () => {
    expect(fs.existsSync(BIN)).toBe(true);
    await h.start();

    // A second real agent process, sqlite backend, same data dir: exits at once, saying why.
    const file = path.join(h.root, 'second.hcl');
    fs.writeFileSync(file, `data_dir = "${h.dataDir}"\nport = ${await freePort()}\nlog_level = "warn"\nstate {\n  backend = "sqlite"\n}\n`);
    const second = spawn(process.execPath, [BIN, 'agent', '-config', file], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    second.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => second.on('exit', (c) => resolve(c)));
    expect(code).toBe(1);
    expect(stderr).toContain(
      `Error starting agent: data dir ${h.dataDir} is in use: another csiplug agent holds its lock ${path.join(h.dataDir, 'agent.lock')}`,
    );
    // It never opened (or created) a state file beside the memory agent.
    expect(fs.existsSync(path.join(h.dataDir, 'state.db'))).toBe(false);

    expectInUse(await startFails(h.dataDir, 'sqlite'), h.dataDir);
    expect((await h.api.health()).ok).toBe(true);

    // The lock dies with its process: no stale lock file to clean up by hand.
    await h.kill('SIGKILL');
    const next = await Agent.start(config(h.dataDir, 'sqlite'), { logger: new MemoryLogger() });
    await next.dispose({ stopTasks: true });
    expect(fs.lstatSync(path.join(h.dataDir, 'state.db')).mode & 0o777).toBe(0o600);
    expect(fs.lstatSync(path.join(h.dataDir, 'agent.lock')).mode & 0o777).toBe(0o600);
    expect(fs.lstatSync(h.dataDir).mode & 0o777).toBe(0o700);
  });
});
