// A plugin that never becomes healthy, with the real agent, executor and
// processes: the supervisor's health-triggered restarts count against the
// task's restart policy. With `restart { attempts = 1, mode = "fail" }` the
// task is restarted exactly once, then it is dead and failed with an event
// that says why, its alloc failed, and the job no longer says `running`.
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { AgentHarness, isAlive, pollUntil } from './support/agent-process';

jest.setTimeout(120_000);

/** A csi_plugin task whose command never creates its socket. */
const NEVER_HEALTHY = `
job "silent-plugin" {
  group "plugin" {
    task "plugin" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "exec sleep 3600"]
      }
      csi_plugin {
        id             = "silent"
        type           = "monolith"
        health_timeout = "1s"
      }
      restart {
        attempts = 1
        interval = "10m"
        delay    = "200ms"
        mode     = "fail"
      }
      kill_timeout = "1s"
    }
  }
}`;

describe('health-triggered restarts of a plugin task follow its restart policy', () => {
  let h: AgentHarness;

  beforeAll(async () => {
    h = new AgentHarness();
    await h.start();
  });

  afterAll(async () => {
    await h.cleanup();
  });

  it('restart { attempts = 1, mode = "fail" }: exactly 1 restart, then dead and failed; the alloc failed, the job not running', async () => {
    const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(NEVER_HEALTHY, 'silent.hcl')));
    const allocId = allocIds[0]!;
    const firstPid = await pollUntil('the plugin task running', () =>
      h.api.getAlloc(allocId).then((a) => (a.tasks.plugin?.state === 'running' ? h.taskPid(allocId, 'plugin') : undefined)),
    );

    const alloc = await pollUntil(
      'the alloc to fail',
      async () => {
        const a = await h.api.getAlloc(allocId);
        return a.clientStatus === 'failed' ? a : undefined;
      },
      30_000,
    );
    const task = alloc.tasks.plugin!;
    expect(task).toMatchObject({ state: 'dead', failed: true, restarts: 1 });
    const types = task.events.map((e) => e.type);
    expect(types.filter((t) => t === 'Started')).toHaveLength(2);
    expect(types.filter((t) => t === 'Restart Signaled')).toHaveLength(2);
    const last = task.events.at(-1)!;
    expect(last.type).toBe('Not Restarting');
    expect(last.message).toMatch(
      /^plugin silent did not become healthy within 1s: socket \S+csi\.sock did not appear within 1s; restart attempts exhausted \(1 in interval 10m, mode "fail"\)$/,
    );

    const job = await h.api.getJob('silent-plugin');
    expect(job.status).not.toBe('running');
    expect(job.status).toBe('dead');

    // It stays that way: no third start, and neither run's process is left.
    await new Promise((r) => setTimeout(r, 2_500));
    const later = await h.api.getAlloc(allocId);
    expect(later.tasks.plugin!.events.filter((e) => e.type === 'Started')).toHaveLength(2);
    expect(isAlive(firstPid)).toBe(false);
    expect(isAlive(h.taskPid(allocId, 'plugin'))).toBe(false);
  });
});
