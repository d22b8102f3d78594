// chroot_env as Nomad reads it, end to end: an agent config entry
// `"<host dir>" = "/srv/code"` shows an isolated (exec, real runc) task the
// host dir at /srv/code; the same entry written the old way round (task
// path = host path) stops the agent at load with the entry named and the
// swapped entry to write.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { AgentHarness, pollUntil } from './support/agent-process';

jest.setTimeout(120_000);

const readerJob = `
job "reader" {
  group "app" {
    task "main" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "cat /srv/code/hello.txt > /local/seen; exec sleep 3600"]
      }
    }
  }
}`;

describe('chroot_env in the agent config: host path = path in the task', () => {
  let h: AgentHarness;
  let code: string;

  beforeEach(() => {
    h = new AgentHarness();
    // Readable by the task's user (nobody): its own dir outside the harness's 0700 root.
    code = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-chroot-code-'));
    fs.chmodSync(code, 0o755);
    fs.writeFileSync(path.join(code, 'hello.txt'), 'from the host dir\n', { mode: 0o644 });
  });
  afterEach(async () => {
    const { leftMounts, leftContainers } = await h.cleanup();
    fs.rmSync(code, { recursive: true, force: true });
    expect(leftMounts).toEqual([]);
    expect(leftContainers).toEqual([]);
  });

  it('shows an isolated task the host dir at the task path the entry names', async () => {
    h.extraConfig = `plugin "exec" {\n  chroot_env = { ${JSON.stringify(code)} = "/srv/code" }\n}\n`;
    await h.start();
    const id = (await h.api.runJob(jobToNomadJson(await parseJobspec(readerJob, 'reader.hcl')))).allocIds[0]!;
    const seen = path.join(h.dataDir, 'allocs', id, 'main', 'local', 'seen');
    await pollUntil('the task read /srv/code', async () => {
      const a = await h.api.getAlloc(id);
      if (a.clientStatus === 'failed') throw new Error(`the task failed: ${JSON.stringify(a.tasks)}`);
      return fs.existsSync(seen) && fs.readFileSync(seen, 'utf8') !== '' ? true : undefined;
    });
    expect(fs.readFileSync(seen, 'utf8')).toBe('from the host dir\n');
    await h.api.stopJob('reader');
  });

  it('refuses at load an entry written the old way round, naming it and the swapped entry', async () => {
    h.extraConfig = `plugin "exec" {\n  chroot_env = { "/srv/no-such-code" = ${JSON.stringify(code)} }\n}\n`;
    const err = await h.start().then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toContain(
      `plugin "exec".chroot_env "/srv/no-such-code" = "${code}": there is no /srv/no-such-code on this host, but there is a ${code}: ` +
        `chroot_env is "host path" = "path in the task", as in Nomad (csiplug used to read it the other way round); ` +
        `to show the task this host's ${code} at /srv/no-such-code, write "${code}" = "/srv/no-such-code"`,
    );
  });
});
