// A full disk under the agent's own log and state (issue 25, item 6): the
// data dir and the file the agent's stderr is appended to share one small
// tmpfs, filled with a file. The agent's log lines are dropped and counted,
// never retried, so the API and health keep answering; a job run it cannot
// save answers 507 with a reason; once space returns the agent lives on,
// says once how many log lines it dropped, and has lost nothing it had
// stored. Needs root (mount); every mount is undone.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { ApiClient, ApiError } from '@csiplug/api';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { AgentHarness, mountsUnder, pollUntil, sleeperHcl } from './support/agent-process';
import { fillUp } from './support/disk';
import { requireRoot } from '@csiplug/core/testing';

jest.setTimeout(120_000);

requireRoot();

const sleeper = async (id: string) => jobToNomadJson(await parseJobspec(sleeperHcl(id), `${id}.hcl`));

describe("the agent's log and data dir on a full filesystem", () => {
  let h: AgentHarness;
  let disk: string;
  let mounted = false;

  beforeAll(async () => {
    // The log file in the data dir, itself a small tmpfs: both fill up together. Every request is logged (debug).
    h = new AgentHarness('', { logFile: 'data/agent.log', logLevel: 'debug' });
    disk = h.dataDir;
    fs.mkdirSync(disk, { mode: 0o711 });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m,mode=0711', 'tmpfs', disk]);
    mounted = true;
    await h.start();
  });

  afterAll(async () => {
    // Stops the jobs, the agent and any process left, unmounts the tmpfs, removes it all.
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual(mounted ? [disk] : []);
    expect(mountsUnder(h.root)).toEqual([]);
  });

  it('keeps answering, refuses a job run it cannot save with 507, lives on when space returns and says once what it dropped', async () => {
    const { allocIds } = await h.api.runJob(await sleeper('kept'));
    await pollUntil('the job running', async () => ((await h.api.getAlloc(allocIds[0]!)).clientStatus === 'running' ? true : undefined));
    const filler = path.join(disk, 'filler');
    fillUp(filler);

    // The API and health answer while every log line is refused (a wedged agent answers nothing: the client gives up).
    const api = new ApiClient({ address: h.api.address, timeoutMs: 20_000 });
    for (let i = 0; i < 5; i++) expect((await api.health()).ok).toBe(true);
    expect((await api.listJobs()).map((j) => j.id)).toEqual(['kept']);
    // Each read is a debug line the disk refuses: more than the last page of the log file holds (4 KiB).
    for (let n = 0; n < 50; n++) await api.listJobs();
    const refused = await api.runJob(await sleeper('second')).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(ApiError);
    expect((refused as ApiError).status).toBe(507);
    expect((refused as ApiError).message).toMatch(/the filesystem it is on is full/);
    expect((await api.health()).ok).toBe(true);

    // Space returns: the agent lives on, says once what it dropped, and has everything it stored.
    fs.rmSync(filler);
    expect((await api.health()).ok).toBe(true);
    const said = await pollUntil('the line about dropped log lines', async () => {
      const lines = h.log.split('\n').filter((l) => l.includes('were dropped'));
      return lines.length ? lines : undefined;
    });
    expect(said).toHaveLength(1);
    expect(JSON.parse(said[0]!)).toMatchObject({ level: 40, error: 'ENOSPC', dropped: expect.any(Number) });
    expect(JSON.parse(said[0]!).dropped).toBeGreaterThan(0);
    expect(h.proc!.exitCode).toBeNull();
    expect((await h.api.getAlloc(allocIds[0]!)).clientStatus).toBe('running');
    const second = await h.api.runJob(await sleeper('second'));
    await pollUntil('the second job running', async () =>
      (await h.api.getAlloc(second.allocIds[0]!)).clientStatus === 'running' ? true : undefined,
    );
    expect((await h.api.listJobs()).map((j) => j.id).sort()).toEqual(['kept', 'second']);
    expect(h.proc!.exitCode).toBeNull();
  });
});

describe("a task's output without a logs block: Nomad's default rotation (10 files of 10 MB)", () => {
  let h: AgentHarness;
  let mounted = false;

  beforeAll(async () => {
    // The data dir on a tmpfs larger than 10 × 10 MB and much smaller than what the task writes: unbounded logs would fill it.
    h = new AgentHarness();
    fs.mkdirSync(h.dataDir, { mode: 0o711 });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=160m,mode=0711', 'tmpfs', h.dataDir]);
    mounted = true;
    await h.start();
  });

  afterAll(async () => {
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual(mounted ? [h.dataDir] : []);
    expect(mountsUnder(h.root)).toEqual([]);
  });

  it('an isolated `yes` keeps stdout.log and stdout.log.1 … .9, 100 MiB at most, and the disk never fills', async () => {
    const hcl = `job "chatty" {\n  group "app" {\n    task "yes" {\n      driver = "exec"\n      config {\n        command = "/usr/bin/yes"\n        args = ["csiplug"]\n      }\n      kill_timeout = "1s"\n    }\n  }\n}`;
    const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(hcl, 'chatty.hcl')));
    const taskDir = path.join(h.dataDir, 'allocs', allocIds[0]!, 'yes');
    const oldest = path.join(taskDir, 'stdout.log.9');
    // Rotated past the oldest kept file: the first .9 was removed, so more than 10 × 10 MB went through.
    const first = await pollUntil('stdout.log.9', () => (fs.existsSync(oldest) ? fs.statSync(oldest).ino : undefined));
    await pollUntil('stdout.log.9 replaced', () => (fs.existsSync(oldest) && fs.statSync(oldest).ino !== first ? true : undefined));
    // The agent answers meanwhile, and the task still runs.
    expect((await h.api.health()).ok).toBe(true);
    expect((await h.api.getAlloc(allocIds[0]!)).clientStatus).toBe('running');
    await h.api.stopJob('chatty');
    const logs = fs.readdirSync(taskDir).filter((f) => f.startsWith('stdout.log'));
    expect(logs.sort()).toEqual(['stdout.log', ...Array.from({ length: 9 }, (_, i) => `stdout.log.${i + 1}`)].sort());
    const total = logs.reduce((n, f) => n + fs.statSync(path.join(taskDir, f)).size, 0);
    expect(total).toBeLessThanOrEqual(10 * 10 * 1024 * 1024);
    for (const f of logs) expect(fs.statSync(path.join(taskDir, f)).size).toBeLessThanOrEqual(10 * 1024 * 1024);
    // A rotated file is full: nothing of the output was lost at a rotation.
    expect(fs.statSync(path.join(taskDir, 'stdout.log.1')).size).toBe(10 * 1024 * 1024);
  });
});
