// chroot_env as Nomad reads it, end to end: an agent config entry
// `"<host dir>" = "/srv/code"` shows an isolated (exec, real runc) task the
// host dir at /srv/code; the same entry written the old way round (task
// path = host path) stops the agent at load with the entry named and the
// ways out; Nomad's client { chroot_env } replaces the defaults, and each
// entry shown at another path is logged once at the start.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { DEFAULT_CHROOT_ENV, jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
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
    // csiplug's plugin "exec" { chroot_env }: its map replaces the defaults as Nomad's client { chroot_env } does, so they are written out.
    const entries = Object.entries({ ...DEFAULT_CHROOT_ENV, [code]: '/srv/code' }).map(
      ([host, inTask]) => `${JSON.stringify(host)} = ${JSON.stringify(inTask)}`,
    );
    h.extraConfig = `plugin "exec" {\n  chroot_env = { ${entries.join(', ')} }\n}\n`;
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
      `plugin "exec".chroot_env "/srv/no-such-code" = "${code}": there is no /srv/no-such-code on this host, but there is a ${code}. ` +
        `chroot_env is "host path" = "path in the task", as in Nomad (csiplug used to read it the other way round). ` +
        `Create the host dir /srv/no-such-code if you meant to show it at ${code} in the task; or remove the entry; ` +
        `or, if you meant to show this host's ${code} at /srv/no-such-code in the task, swap it: "${code}" = "/srv/no-such-code"`,
    );
  });

  it("reads Nomad's client { chroot_env } (its entries replace the defaults) and warns once at start of each host dir shown at another path", async () => {
    // The defaults' dirs a shell needs, then the host dir at /srv/code: with client { chroot_env } none of the defaults is added.
    // Written as Nomad's docs write it: a block of quoted keys (HCL 1's map), and the job as a Nomad job, with datacenters.
    h.extraConfig =
      `client {\n  enabled = true\n  chroot_env {\n    "/bin" = "/bin"\n    "/lib" = "/lib"\n    "/lib64" = "/lib64"\n    "/usr" = "/usr"\n` +
      `    "/etc/passwd" = "/etc/passwd"\n    "/etc/group" = "/etc/group"\n    ${JSON.stringify(code)} = "/srv/code"\n  }\n}\n`;
    await h.start();
    const warning = `chroot_env: each exec task sees this host's ${code} at /srv/code`;
    await pollUntil('the start warning logged', async () => (h.log.includes(warning) ? true : undefined));
    expect(h.log.split(warning).length - 1).toBe(1);
    const job = readerJob
      .replace(
        'cat /srv/code/hello.txt > /local/seen',
        'cat /srv/code/hello.txt > /local/seen; test -e /sbin || echo no-sbin >> /local/seen',
      )
      .replace('job "reader" {', 'job "reader" {\n  datacenters = ["dc1"]');
    const id = (await h.api.runJob(jobToNomadJson(await parseJobspec(job, 'reader.hcl')))).allocIds[0]!;
    const seen = path.join(h.dataDir, 'allocs', id, 'main', 'local', 'seen');
    await pollUntil('the task read /srv/code', async () => {
      const a = await h.api.getAlloc(id);
      if (a.clientStatus === 'failed') throw new Error(`the task failed: ${JSON.stringify(a.tasks)}`);
      return fs.existsSync(seen) && fs.readFileSync(seen, 'utf8').includes('no-sbin') ? true : undefined;
    });
    // The default /sbin is not there: the map replaced the defaults, as in Nomad.
    expect(fs.readFileSync(seen, 'utf8')).toBe('from the host dir\nno-sbin\n');
    await h.api.stopJob('reader');
  });
});
