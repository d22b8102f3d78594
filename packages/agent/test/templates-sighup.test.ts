// A job's template blocks in a real agent: rendered into the task dir before
// the task starts (an env template reaching the task's environment), and
// rendered again on a SIGHUP of the agent, when a changed file restarts the
// task (change_mode "restart") with a "Restart Signaled" event as Nomad's.
import * as fs from 'fs';
import * as path from 'path';
import { jobToDocument, parseJobspec } from '@csiplug/jobspec';
import { AgentHarness, pollUntil, runningAlloc } from './support/agent-process';

jest.setTimeout(90_000);

describe('templates in a running agent', () => {
  let h: AgentHarness;
  beforeEach(() => {
    h = new AgentHarness('', { logLevel: 'info' });
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('renders before the start, and on SIGHUP re-renders a changed source and restarts the task', async () => {
    await h.start();
    const source = path.join(h.root, 'app.tpl');
    fs.writeFileSync(source, 'version=v1 alloc={{ env "NOMAD_ALLOC_ID" }}\n');
    const hcl = `
job "tpl" {
  group "app" {
    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \\"mode=$MODE\\"; exec /bin/sleep 3600"]
      }
      kill_timeout = "1s"
      template {
        data        = "MODE={{ \\"from-template\\" | toUpper }}\\n"
        destination = "secrets/app.env"
        env         = true
      }
      template {
        source      = "${source}"
        destination = "local/app.conf"
        splay       = "0s"
      }
    }
  }
}`;
    await h.api.runJob(jobToDocument(await parseJobspec(hcl, 'tpl.hcl')));
    const alloc = await pollUntil('the alloc to run', async () => runningAlloc(await h.api.getJob('tpl')), 30_000);
    const taskDir = path.join(h.dataDir, 'allocs', alloc.id, 'main');
    const conf = path.join(taskDir, 'local', 'app.conf');
    expect(fs.readFileSync(conf, 'utf8')).toBe(`version=v1 alloc=${alloc.id}\n`);
    await pollUntil(
      'the task to print its env',
      async () => ((await h.api.allocLogs(alloc.id, 'main')).data.includes('mode=FROM-TEMPLATE') ? true : undefined),
      15_000,
    );
    const firstPid = h.taskPid(alloc.id, 'main');

    // A SIGHUP with nothing changed leaves the task alone.
    process.kill(h.proc!.pid!, 'SIGHUP');
    await pollUntil('the reload', async () => (h.log.includes('templates re-rendered on a reload') ? true : undefined), 15_000);
    expect(h.taskPid(alloc.id, 'main')).toBe(firstPid);

    fs.writeFileSync(source, 'version=v2\n');
    process.kill(h.proc!.pid!, 'SIGHUP');
    await pollUntil(
      'the task to restart with the new file',
      async () => {
        const events = (await h.api.getAlloc(alloc.id)).tasks.main?.events ?? [];
        return events.some((e) => e.type === 'Restart Signaled') && h.taskPid(alloc.id, 'main') !== firstPid ? true : undefined;
      },
      30_000,
    );
    expect(fs.readFileSync(conf, 'utf8')).toBe('version=v2\n');
    const task = (await h.api.getAlloc(alloc.id)).tasks.main!;
    expect(task.events.find((e) => e.type === 'Restart Signaled')?.message).toBe('Template with change_mode restart re-rendered');
    expect(task.failed).toBe(false);
  });
});
