// Storage faults with the real agent: the data dir on a full filesystem (a
// small tmpfs, filled with a file) refuses `job run` with a clear error and
// nothing half-applied, and serves normally once space returns (the job then
// survives a kill -9); a `job stop` it cannot save is refused the same way
// and kills nothing; a corrupt state file is refused and left as it was;
// the memory backend stops its tasks when the agent exits and refuses
// `stop_tasks_on_exit = false`. Needs root (mount); every mount is undone.
import { execFile, execFileSync } from 'child_process';
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { openClientState } from '@csiplug/state';
import { ApiError } from '@csiplug/api';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { AgentHarness, BIN, isAlive, mountsUnder, pollUntil, sleeperHcl } from './support/agent-process';
import { fillUp } from './support/disk';
import { requireRoot } from '@csiplug/core/testing';

jest.setTimeout(120_000);

const sleeper = async (id: string) => jobToNomadJson(await parseJobspec(sleeperHcl(id), `${id}.hcl`));

/** Starts `csiplug agent` on a config that must be refused; resolves with its exit code and output once it has exited. */
function refusedAgent(h: AgentHarness, config: string): Promise<{ code: number; stdout: string; stderr: string }> {
  fs.writeFileSync(h.configFile, `data_dir = "${h.dataDir}"\nport = 0\nlog_level = "warn"\n${config}\n`);
  return cli(['agent', '-config', h.configFile]);
}

/** Runs the CLI; resolves with its exit code and output. */
function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

describe('the data dir on a full filesystem', () => {
  requireRoot(); // fails the file in a non-root run: tmpfs mounts
  let h: AgentHarness;
  let mounted = false;
  let filler: string;

  beforeAll(async () => {
    h = new AgentHarness();
    fs.mkdirSync(h.dataDir, { mode: 0o711 });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m,mode=0711', 'tmpfs', h.dataDir]);
    mounted = true;
    filler = path.join(h.dataDir, 'filler');
    await h.start();
  });

  afterAll(async () => {
    // Stops the jobs, the agent and any process left, unmounts what is mounted under its root (our tmpfs), removes it all.
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual(mounted ? [h.dataDir] : []);
    expect(mountsUnder(h.root)).toEqual([]);
  });

  it('job run is refused with a clear error and nothing half-applied; with space back, a job runs and survives kill -9', async () => {
    fillUp(filler);
    const file = path.join(h.root, 'sleeper.hcl');
    fs.writeFileSync(file, sleeperHcl('sleeper'));

    // The operator's view: the CLI says why, and fails.
    const refused = await cli(['job', 'run', '-address', `http://127.0.0.1:${h.port}`, file]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /^Error: could not save alloc [0-9a-f-]{36} of job "sleeper": cannot write \S+\/state\.db: the filesystem it is on is full \(SQLITE_FULL: /,
    );
    expect(refused.stderr).toContain('nothing of this request was started or stopped');

    // The API's: 507 Insufficient Storage with a code to switch on.
    const err = await h.api.runJob(await sleeper('sleeper')).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(507);
    expect((err as ApiError).code).toBe('EALLOC_SAVE_NO_SPACE');

    // Nothing was applied: no job, no alloc dir, no task; the agent serves on.
    expect(await h.api.listJobs()).toEqual([]);
    expect(fs.existsSync(path.join(h.dataDir, 'allocs')) ? fs.readdirSync(path.join(h.dataDir, 'allocs')) : []).toEqual([]);
    expect((await h.api.health()).ok).toBe(true);

    // Space returns: normal service.
    fs.rmSync(filler);
    const { allocIds } = await h.api.runJob(await sleeper('sleeper'));
    const allocId = allocIds[0]!;
    await pollUntil('the job running', async () => ((await h.api.getAlloc(allocId)).clientStatus === 'running' ? true : undefined));
    const pid = h.taskPid(allocId, 'main');

    // The state file is sound and holds the job: an agent killed now finds it again.
    await h.kill('SIGKILL');
    expect(isAlive(pid)).toBe(true);
    const state = openClientState({ path: path.join(h.dataDir, 'state.db') }); // runs SQLite's quick_check
    try {
      expect(state.foundEmpty).toBeUndefined();
      expect(state.listAllocations().allocs.map((a) => a.allocId)).toEqual([allocId]);
    } finally {
      state.dispose();
    }
    await h.start();
    const back = await pollUntil('the alloc re-attached', async () => {
      const a = await h.api.getAlloc(allocId);
      return a.clientStatus === 'running' && a.tasks.main?.state === 'running' ? a : undefined;
    });
    expect(back.tasks.main!.restarts).toBe(0);
    expect(h.taskPid(allocId, 'main')).toBe(pid);
    expect((await h.api.listJobs()).map((j) => j.id)).toEqual(['sleeper']);

    // A stop the agent cannot save is refused the same way, and kills nothing:
    // a stop the next agent never reads would run the job again.
    fillUp(filler);
    const stopRefused = await h.api.stopJob('sleeper').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(stopRefused).toBeInstanceOf(ApiError);
    expect((stopRefused as ApiError).status).toBe(507);
    expect((stopRefused as ApiError).message).toMatch(
      /could not save the stop of alloc [0-9a-f-]{36} of job "sleeper": .*; the alloc was not stopped and runs on/,
    );
    expect(isAlive(pid)).toBe(true);
    expect((await h.api.getAlloc(allocId)).desiredStatus).toBe('run');
    fs.rmSync(filler);
    await h.api.stopJob('sleeper');
    expect(isAlive(pid)).toBe(false);
  });
});

describe('a corrupt state file', () => {
  let h: AgentHarness;

  beforeAll(() => {
    h = new AgentHarness();
  });
  afterAll(async () => {
    await h.cleanup();
  });

  it('is refused at start with an error naming it, and left exactly as it was', async () => {
    fs.mkdirSync(h.dataDir, { mode: 0o711 });
    const file = path.join(h.dataDir, 'state.db');
    fs.writeFileSync(file, crypto.randomBytes(64 * 1024), { mode: 0o600 });
    const before = crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
    const refused = await refusedAgent(h, '');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`invalid database ${file}`);
    expect(refused.stderr).toContain('the file was left as it is');
    expect(crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex')).toBe(before);
  });
});

describe('the memory state backend', () => {
  let h: AgentHarness;

  afterEach(async () => {
    await h.cleanup();
  });

  it('stops its tasks when the agent exits: a restarted agent would know none of them', async () => {
    h = new AgentHarness('state {\n  backend = "memory"\n}\n');
    await h.start();
    const { allocIds } = await h.api.runJob(await sleeper('sleeper'));
    await pollUntil('the job running', async () => ((await h.api.getAlloc(allocIds[0]!)).clientStatus === 'running' ? true : undefined));
    const pid = h.taskPid(allocIds[0]!, 'main');
    await h.kill('SIGTERM');
    expect(h.log).toContain('stopping tasks');
    expect(isAlive(pid)).toBe(false);
  });

  it('refuses stop_tasks_on_exit = false, naming both keys and what to use instead', async () => {
    h = new AgentHarness();
    const refused = await refusedAgent(h, 'state {\n  backend = "memory"\n}\nstop_tasks_on_exit = false\n');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `Error starting agent: ${h.configFile}: stop_tasks_on_exit may not be false with state { backend = "memory" }`,
    );
    expect(refused.stderr).toContain(
      'Use state { backend = "sqlite" } to keep tasks running across agent restarts, or stop_tasks_on_exit = true',
    );
    // Nothing was started on it: not even its data dir's lock.
    expect(fs.existsSync(path.join(h.dataDir, 'agent.lock'))).toBe(false);
  });
});
