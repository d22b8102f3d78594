// A job's template blocks in a real agent: rendered into the task dir before
// the task starts (an env template reaching the task's environment), and
// rendered again on a SIGHUP of the agent, when a changed file restarts the
// task (change_mode "restart") with a "Restart Signaled" event as Nomad's;
// an isolated task (runc) sees its files at /local and /secrets, owned by
// its user, and a change_signal reaches it inside its container.
import * as fs from 'fs';
import * as path from 'path';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { AgentHarness, pollUntil, runningAlloc } from './support/agent-process';

jest.setTimeout(90_000);

describe('templates in a running agent', () => {
  let h: AgentHarness;
  beforeEach(() => {
    h = new AgentHarness('', { logLevel: 'info' });
  });
  afterEach(async () => {
    const { leftMounts, leftContainers } = await h.cleanup();
    expect(leftMounts).toEqual([]);
    expect(leftContainers).toEqual([]);
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
    await h.api.runJob(jobToNomadJson(await parseJobspec(hcl, 'tpl.hcl')));
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

  it('an isolated task reads its files where it sees them, as its user, and a changed signal template signals it in its container', async () => {
    await h.start();
    const hcl = `
job "iso-tpl" {
  group "app" {
    restart {
      attempts = 10
      delay    = "200ms"
    }
    task "main" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'cat /local/app.conf > /local/after-hup' HUP; cat /local/app.conf > /local/seen; id -u > /local/uid; echo \\"$TOKEN\\" > /local/token; while true; do sleep 0.1; done"]
      }
      kill_timeout = "1s"
      template {
        data        = "TOKEN={{ env \\"NOMAD_TASK_NAME\\" }}-secret\\n"
        destination = "\${NOMAD_SECRETS_DIR}/token.env"
        env         = true
        perms       = "0600"
      }
      template {
        source        = "local/app.tpl"
        destination   = "local/app.conf"
        change_mode   = "signal"
        change_signal = "SIGHUP"
        splay         = "0s"
      }
    }
  }
}`;
    const spec = await parseJobspec(hcl, 'iso.hcl');
    await h.api.runJob(jobToNomadJson(spec));
    const alloc = await pollUntil(
      'the alloc to be placed',
      async () => (await h.api.getJob('iso-tpl')).allocs.find((a) => a.desiredStatus === 'run'),
      30_000,
    );
    const taskDir = path.join(h.dataDir, 'allocs', alloc.id, 'main');
    const local = path.join(taskDir, 'local');
    // The source is in the task's own dir (Nomad's file sandbox): until it is there a start fails, and the restart policy tries again.
    await pollUntil('the task dir', async () => (fs.existsSync(local) ? true : undefined), 30_000);
    fs.writeFileSync(path.join(local, 'app.tpl'), 'v1 {{ "x" | toUpper }}\n');
    await pollUntil('the task to read its file', async () => (fs.existsSync(path.join(local, 'token')) ? true : undefined), 60_000);
    expect(fs.readFileSync(path.join(local, 'seen'), 'utf8')).toBe('v1 X\n');
    expect(fs.readFileSync(path.join(local, 'token'), 'utf8')).toBe('main-secret\n');
    const uid = Number(fs.readFileSync(path.join(local, 'uid'), 'utf8'));
    expect(uid).not.toBe(0);
    expect(fs.statSync(path.join(local, 'app.conf')).uid).toBe(uid);
    const secret = fs.statSync(path.join(taskDir, 'secrets', 'token.env'));
    expect([secret.uid, secret.mode & 0o777]).toEqual([uid, 0o600]);
    const pid = h.taskPid(alloc.id, 'main');

    fs.writeFileSync(path.join(local, 'app.tpl'), 'v2\n');
    process.kill(h.proc!.pid!, 'SIGHUP');
    await pollUntil('the task to handle the signal', async () => (fs.existsSync(path.join(local, 'after-hup')) ? true : undefined), 30_000);
    expect(fs.readFileSync(path.join(local, 'after-hup'), 'utf8')).toBe('v2\n');
    expect(h.taskPid(alloc.id, 'main')).toBe(pid);
    const events = (await h.api.getAlloc(alloc.id)).tasks.main!.events;
    expect(events.find((e) => e.type === 'Signaling')?.message).toBe('Template re-rendered; sent SIGHUP');
  });
});
