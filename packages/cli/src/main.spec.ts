// The CLI end to end in-process: main() against a real HttpApi over the
// in-memory FakeAgentService, through ApiClient.
import { CsiplugError, MemoryLogger } from '@csiplug/core';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { parseVolumeSpec } from '@csiplug/jobspec';
import { Readable } from 'stream';
import { HttpApi } from '@csiplug/api';
import type { AllocView, JobView } from '@csiplug/api';
import { FakeAgentService, fakeUuid } from '@csiplug/api/testing';
import type { CliHandlers, CliIo } from './io';
import { main } from './main';

const EXAMPLES = path.resolve(__dirname, '../../../examples');

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

const JOB_JSON = {
  job: {
    web: {
      group: {
        app: {
          count: 2,
          volume: { data: { type: 'csi', source: 'vol1', access_mode: 'single-node-writer' } },
          task: {
            main: {
              driver: 'raw_exec',
              config: { command: '/bin/sleep', args: ['100'] },
              volume_mount: { volume: 'data', destination: 'data' },
            },
            side: { driver: 'raw_exec', config: { command: '/bin/true' } },
          },
        },
      },
    },
  },
};

const VOLUME_HCL = `
id          = "vol1"
type        = "csi"
plugin_id   = "hostpath"
external_id = "ext-1"
capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}
`;

describe('csiplug CLI', () => {
  let fake: FakeAgentService;
  let api: HttpApi;
  let url: string;
  let dir: string;

  beforeEach(async () => {
    fake = new FakeAgentService();
    api = new HttpApi(fake, { bindAddr: '127.0.0.1', port: 0, logger: new MemoryLogger() });
    const { address, port } = await api.listen();
    url = `http://${address}:${port}`;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-cli-'));
    fs.writeFileSync(path.join(dir, 'web.json'), JSON.stringify(JOB_JSON));
    fs.writeFileSync(path.join(dir, 'vol.hcl'), VOLUME_HCL);
  });

  afterEach(async () => {
    await api.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  async function cli(
    argv: string[],
    options: { env?: Record<string, string>; stdin?: string; handlers?: CliHandlers; noAddress?: boolean } = {},
  ): Promise<Result> {
    // Bytes, joined before decoding: a log streamed in chunks may split a character between two.
    const out: Buffer[] = [];
    let stderr = '';
    const io: CliIo = {
      stdout: { write: (s: string | Uint8Array) => out.push(Buffer.from(s)) },
      stderr: { write: (s: string | Uint8Array) => (stderr += s) },
      env: options.env ?? (options.noAddress ? {} : { CSIPLUG_ADDR: url }),
      cwd: dir,
      ...(options.stdin !== undefined ? { stdin: Readable.from([Buffer.from(options.stdin)]) } : {}),
    };
    const code = await main(argv, io, options.handlers);
    return { code, stdout: Buffer.concat(out).toString('utf8'), stderr };
  }

  describe('help and usage', () => {
    it('prints the top usage for -h, --help and help, and exits 1 without a command', async () => {
      for (const h of ['-h', '--help', 'help']) {
        const r = await cli([h]);
        expect(r.code).toBe(0);
        expect(r.stdout).toMatch(/^Usage: csiplug/);
        expect(r.stdout).toMatch(/job\s+Run, stop and inspect jobs/);
        expect(r.stdout).toMatch(/volume\s+Register/);
      }
      const r = await cli([]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^Usage: csiplug/);
    });

    it('prints a group usage for `job -h`, and exits 1 for `job` alone', async () => {
      const r = await cli(['job', '-h']);
      expect(r.code).toBe(0);
      for (const sub of ['run', 'stop', 'status', 'validate']) expect(r.stdout).toMatch(new RegExp(`\\n    ${sub}\\s`));
      expect((await cli(['job'])).code).toBe(1);
      expect((await cli(['help', 'volume'])).stdout).toMatch(/deregister/);
    });

    it('prints a command usage with its options for -h and --help', async () => {
      const r = await cli(['job', 'run', '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^Usage: csiplug job run \[options\] FILE/);
      expect(r.stdout).toMatch(/-address=<addr>/);
      expect(r.stdout).toMatch(/Overrides\s+the\s+CSIPLUG_TOKEN\s+environment\s+variable/);
      expect(r.stdout).toMatch(/NOMAD_TOKEN\s+is\s+read\s+when\s+CSIPLUG_TOKEN\s+is\s+not\s+set,\s+whichever\s+address/);
      expect(r.stdout).toMatch(/Default = http:\/\/127\.0\.0\.1:4747/);
      expect(r.stdout).toMatch(/-json/);
      expect((await cli(['volume', 'deregister', '-h'])).stdout).toMatch(/-force/);
    });

    it('exits 1 with usage for unknown commands, unknown flags and wrong argument counts', async () => {
      let r = await cli(['bogus']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^Error: unknown command "bogus"/);
      r = await cli(['job', 'bogus']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/unknown command "job bogus"/);
      r = await cli(['job', 'status', '-nope']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^Error: flag provided but not defined: -nope\n\nUsage: csiplug job status \[options\] \[ID\]/);
      r = await cli(['job', 'run']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/takes 1 argument \(FILE\), got 0/);
      r = await cli(['alloc', 'logs', 'a', 'b', 'c']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/takes 1 to 2 arguments/);
      expect(r.stdout).toBe('');
    });

    it('prints the version', async () => {
      const r = await cli(['version']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^csiplug v\d+\.\d+\.\d+/);
    });
  });

  describe('agent and demo', () => {
    it('say they are unavailable without handlers', async () => {
      for (const c of ['agent', 'demo']) {
        const r = await cli([c, '-dev']);
        expect(r.code).toBe(1);
        expect(r.stderr).toMatch(new RegExp(`"csiplug ${c}" is not available`));
      }
    });

    it('hand their raw arguments to the handlers and return their exit code', async () => {
      const seen: string[][] = [];
      const handlers: CliHandlers = {
        agent: async (args) => (seen.push(['agent', ...args]), 0),
        demo: async (args, io) => (seen.push(['demo', ...args]), io.stdout.write('demo ran\n'), 3),
      };
      expect((await cli(['agent', '-config', 'a.hcl', '--dev'], { handlers })).code).toBe(0);
      const r = await cli(['demo', 'x'], { handlers });
      expect(r.code).toBe(3);
      expect(r.stdout).toBe('demo ran\n');
      expect(seen).toEqual([
        ['agent', '-config', 'a.hcl', '--dev'],
        ['demo', 'x'],
      ]);
    });
  });

  describe('address and token', () => {
    it('uses -address over CSIPLUG_ADDR, and either works', async () => {
      expect((await cli(['job', 'status'])).code).toBe(0);
      expect((await cli(['job', 'status', '-address', url], { env: { CSIPLUG_ADDR: 'http://127.0.0.1:1' } })).code).toBe(0);
      expect((await cli(['job', 'status', `--address=${url.replace('http://', '')}`], { env: {} })).code).toBe(0);
    });

    it('fails with exit 1 when the agent cannot be reached', async () => {
      const r = await cli(['job', 'status', '-address', 'http://127.0.0.1:1']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^Error: cannot reach the csiplug agent at http:\/\/127\.0\.0\.1:1/);
    });

    it('refuses an address that is neither http nor https', async () => {
      const r = await cli(['job', 'status', '-address', 'ftp://x:1']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/must use http:\/\/ or https:\/\//);
    });

    it('sends -token or CSIPLUG_TOKEN to an agent with ACLs', async () => {
      const secured = new HttpApi(fake, { bindAddr: '127.0.0.1', port: 0, aclToken: 'tok', logger: new MemoryLogger() });
      const { port } = await secured.listen();
      const addr = `http://127.0.0.1:${port}`;
      try {
        let r = await cli(['plugin', 'status'], { env: { CSIPLUG_ADDR: addr } });
        expect(r.code).toBe(1);
        expect(r.stderr).toMatch(/^Error: this agent requires an ACL token/);
        r = await cli(['plugin', 'status', '-token', 'nope'], { env: { CSIPLUG_ADDR: addr } });
        expect(r.code).toBe(1);
        expect(r.stderr).toMatch(/not valid/);
        expect((await cli(['plugin', 'status', '-token=tok'], { env: { CSIPLUG_ADDR: addr } })).code).toBe(0);
        expect((await cli(['plugin', 'status'], { env: { CSIPLUG_ADDR: addr, CSIPLUG_TOKEN: 'tok' } })).code).toBe(0);
        expect((await cli(['plugin', 'status', '--token', 'tok'], { env: { CSIPLUG_ADDR: addr, CSIPLUG_TOKEN: 'bad' } })).code).toBe(0);
        // Nomad's variables when csiplug's are not set; csiplug's win when both are.
        expect((await cli(['plugin', 'status'], { env: { NOMAD_ADDR: addr, NOMAD_TOKEN: 'tok' } })).code).toBe(0);
        expect(
          (
            await cli(['plugin', 'status'], {
              env: { NOMAD_ADDR: 'http://127.0.0.1:1', CSIPLUG_ADDR: addr, NOMAD_TOKEN: 'bad', CSIPLUG_TOKEN: 'tok' },
            })
          ).code,
        ).toBe(0);
        expect((await cli(['plugin', 'status'], { env: { NOMAD_ADDR: addr, NOMAD_TOKEN: 'bad' } })).stderr).toMatch(/not valid/);
        // Each variable is read on its own, as Nomad reads them: NOMAD_TOKEN with CSIPLUG_ADDR, NOMAD_ADDR with CSIPLUG_TOKEN.
        expect((await cli(['plugin', 'status'], { env: { CSIPLUG_ADDR: addr, NOMAD_TOKEN: 'tok' } })).code).toBe(0);
        expect((await cli(['plugin', 'status'], { env: { NOMAD_ADDR: addr, CSIPLUG_TOKEN: 'tok' } })).code).toBe(0);
        expect((await cli(['plugin', 'status', '-address', addr], { env: { NOMAD_TOKEN: 'tok' } })).code).toBe(0);
        // When both are set, csiplug's wins, each variable on its own.
        let both = await cli(['plugin', 'status'], { env: { CSIPLUG_ADDR: addr, NOMAD_TOKEN: 'tok', CSIPLUG_TOKEN: 'bad' } });
        expect(both.stderr).toMatch(/not valid/);
        both = await cli(['plugin', 'status'], { env: { NOMAD_ADDR: 'http://127.0.0.1:1', CSIPLUG_ADDR: addr, NOMAD_TOKEN: 'tok' } });
        expect(both.code).toBe(0);
        // Using NOMAD_ADDR is said on stderr.
        expect((await cli(['plugin', 'status'], { env: { NOMAD_ADDR: addr, NOMAD_TOKEN: 'tok' } })).stderr).toContain(
          `(talking to NOMAD_ADDR=${addr}: CSIPLUG_ADDR is not set)`,
        );
      } finally {
        await secured.dispose();
      }
    });
  });

  describe('timeout and TLS flags', () => {
    it('every API command takes -timeout, -ca-cert and -tls-skip-verify, the last marked insecure', async () => {
      const r = await cli(['job', 'stop', '-h']);
      expect(r.stdout).toMatch(/-timeout=<duration>/);
      expect(r.stdout).toMatch(/-ca-cert=<path>[\s\S]*CSIPLUG_CACERT/);
      expect(r.stdout).toMatch(/NOMAD_CACERT/);
      expect(r.stdout).toMatch(/-tls-skip-verify\n[\s\S]*INSECURE[\s\S]*CSIPLUG_SKIP_VERIFY/);
      expect((await cli(['job', 'validate', '-h'])).stdout).not.toMatch(/-timeout/);
    });

    it('without -timeout a call waits for the agent; with it, gives up naming the agent and the time', async () => {
      await cli(['job', 'run', 'web.json']);
      let release!: () => void;
      fake.gate = new Promise((resolve) => (release = resolve));
      try {
        const waiting = cli(['job', 'stop', 'web']);
        const cut = await cli(['job', 'stop', '-timeout', '50ms', 'web']);
        expect(cut.code).toBe(1);
        expect(cut.stderr).toMatch(
          new RegExp(`^Error: no answer from the agent at ${url} within 50ms \\(DELETE /v1/job/web\\); it may still be working on it`),
        );
        release();
        expect((await waiting).stdout).toMatch(/Job "web" stopped/);
      } finally {
        release();
        fake.gate = undefined;
      }
    });

    it('refuses a bad -timeout, an unreadable CA file and a bad CSIPLUG_SKIP_VERIFY before any call', async () => {
      let r = await cli(['job', 'status', '-timeout', 'soon']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^Error: -timeout: cannot parse duration "soon".*\(0 means no limit\)/);
      r = await cli(['job', 'status', '-address', 'https://127.0.0.1:1', '-ca-cert', 'missing.pem']);
      expect(r.stderr).toMatch(/^Error: cannot read the CA certificate missing\.pem \(from -ca-cert\): no such file/);
      const https = 'https://127.0.0.1:1';
      r = await cli(['job', 'status'], { env: { CSIPLUG_ADDR: https, NOMAD_CACERT: 'nomad.pem' } });
      expect(r.stderr).toMatch(/cannot read the CA certificate nomad\.pem \(from NOMAD_CACERT\)/);
      r = await cli(['job', 'status'], { env: { CSIPLUG_ADDR: https, CSIPLUG_CACERT: 'ours.pem', NOMAD_CACERT: 'nomad.pem' } });
      expect(r.stderr).toMatch(/ours\.pem \(from CSIPLUG_CACERT\)/);
      // Plain http has no use for a CA: one set for Nomad is not read.
      expect((await cli(['job', 'status'], { env: { CSIPLUG_ADDR: url, NOMAD_CACERT: 'nomad.pem' } })).code).toBe(0);
      fs.writeFileSync(path.join(dir, 'junk.pem'), 'not a certificate');
      r = await cli(['job', 'status', '-address', 'https://127.0.0.1:1', '-ca-cert', 'junk.pem']);
      expect(r.stderr).toMatch(/the CA certificate is not PEM/);
      r = await cli(['job', 'status'], { env: { CSIPLUG_ADDR: url, CSIPLUG_SKIP_VERIFY: 'maybe' } });
      expect(r.stderr).toMatch(/invalid boolean value "maybe" in CSIPLUG_SKIP_VERIFY/);
      expect(fake.calls).toEqual([]);
    });
  });

  describe('job', () => {
    it('job run FILE posts the parsed job and prints the alloc ids', async () => {
      const r = await cli(['job', 'run', 'web.json']);
      expect(r.code).toBe(0);
      const ids = [fakeUuid(1), fakeUuid(2)];
      expect(r.stdout).toBe(
        `==> Job "web" registered (version 0)\n    Allocation "${ids[0]}" created\n    Allocation "${ids[1]}" created\n`,
      );
      expect(fake.jobs.get('web')!.job.groups[0]!.tasks.map((t) => t.name)).toEqual(['main', 'side']);
      // The same file again changes nothing: no alloc is made or stopped, the version stays.
      const again = await cli(['job', 'run', '-json', 'web.json']);
      expect(JSON.parse(again.stdout)).toMatchObject({ jobId: 'web', allocIds: [], replaced: true, unchanged: true, version: 0 });
      expect((await cli(['job', 'run', 'web.json'])).stdout).toBe('==> Job "web" unchanged (version 0): nothing to do\n');
      expect([...fake.allocs.values()].map((a) => a.desiredStatus)).toEqual(['run', 'run']);
      // A changed task replaces both allocs, as version 1.
      const changed = structuredClone(JOB_JSON);
      changed.job.web.group.app.task.main.config.args = ['200'];
      fs.writeFileSync(path.join(dir, 'web2.json'), JSON.stringify(changed));
      const third = await cli(['job', 'run', '-json', 'web2.json']);
      expect(JSON.parse(third.stdout)).toMatchObject({
        jobId: 'web',
        allocIds: [fakeUuid(3), fakeUuid(4)],
        replaced: true,
        unchanged: false,
        version: 1,
      });
      expect([...fake.allocs.values()].map((a) => `${a.jobVersion} ${a.desiredStatus}`)).toEqual(['0 stop', '0 stop', '1 run', '1 run']);
    });

    it('job run of a changed count prints the version and what changed', async () => {
      await cli(['job', 'run', 'web.json']);
      const bigger = structuredClone(JOB_JSON);
      bigger.job.web.group.app.count = 3;
      fs.writeFileSync(path.join(dir, 'web3.json'), JSON.stringify(bigger));
      const r = await cli(['job', 'run', 'web3.json']);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`==> Job "web" updated to version 1: 1 create, 2 in-place update\n    Allocation "${fakeUuid(3)}" created\n`);
    });

    describe('job plan', () => {
      const write = (name: string, edit: (j: typeof JOB_JSON) => void) => {
        const doc = structuredClone(JOB_JSON);
        edit(doc);
        fs.writeFileSync(path.join(dir, name), JSON.stringify(doc));
      };

      it('exits 1 for a new job and shows the allocs it would create', async () => {
        const r = await cli(['job', 'plan', 'web.json']);
        expect(r.code).toBe(1);
        expect(r.stdout).toBe(
          [
            '+ Job: "web" (version 0)',
            '+ Task Group: "app" (2 create)',
            '  Update: max_parallel = 1, min_healthy_time = 10s, healthy_deadline = 5m0s, auto_revert = false',
            '    Update  Alloc       ID  Why',
            '    create  web.app[0]  -   new job',
            '    create  web.app[1]  -   new job',
            '',
            "Changes: 2 create; job version none => 0. 'job run' would make them.",
            '',
          ].join('\n'),
        );
        expect(fake.calls).toEqual([]);
      });

      it('exits 0 when nothing would change', async () => {
        await cli(['job', 'run', 'web.json']);
        const r = await cli(['job', 'plan', 'web.json']);
        expect(r.code).toBe(0);
        expect(r.stdout).toBe(
          ['Job: "web" (version 0)', 'Task Group: "app" (2 ignore)', '', `No changes: 'job run' would leave job "web" as it is.`, ''].join(
            '\n',
          ),
        );
        expect(fake.calls).toEqual(['runJob web']);
      });

      it('names the changed fields, the replacement order and each alloc', async () => {
        await cli(['job', 'run', 'web.json']);
        write('env.json', (j) => {
          (j.job.web.group.app.task.main as Record<string, unknown>).env = { MODE: 'fast' };
          (j.job.web.group.app as Record<string, unknown>).update = { max_parallel: 2, auto_revert: true };
        });
        const r = await cli(['job', 'plan', 'env.json']);
        expect(r.code).toBe(1);
        const [a1, a2] = [fakeUuid(1), fakeUuid(2)].map((id) => id.slice(0, 8));
        expect(r.stdout).toBe(
          [
            '+/- Job: "web" (version 0 => 1)',
            '+/- Task Group: "app" (2 create/destroy update)',
            '  + task "main" env.MODE: "fast" (forces create/destroy update)',
            '  +/- update.auto_revert: false => true (in-place)',
            '  +/- update.max_parallel: 1 => 2 (in-place)',
            `  Order:  stop before start: volume "data" (vol1) is single-node-writer: one writer at a time, so the old alloc releases it before the new one claims it`,
            '  Update: max_parallel = 2, min_healthy_time = 10s, healthy_deadline = 5m0s, auto_revert = true',
            '    Update                 Alloc       ID                    Why',
            `    create/destroy update  web.app[0]  ${a1} (version 0)  task "main" env.MODE: added ("fast")`,
            `    create/destroy update  web.app[1]  ${a2} (version 0)  task "main" env.MODE: added ("fast")`,
            '',
            "Changes: 2 create/destroy update; job version 0 => 1. 'job run' would make them.",
            '',
          ].join('\n'),
        );
        const json = await cli(['job', 'plan', '-json', 'env.json']);
        expect(json.code).toBe(1);
        expect(JSON.parse(json.stdout)).toMatchObject({
          jobId: 'web',
          changed: true,
          version: { from: 0, to: 1 },
          groups: [{ name: 'app', updates: { 'create/destroy': 2 }, order: { kind: 'stop-before-start' } }],
        });
        expect(fake.calls).toEqual(['runJob web']);
      });

      it('exits 0 for an in-place-only change (a new version, no alloc created, destroyed or replaced), as Nomad does', async () => {
        await cli(['job', 'run', 'web.json']);
        write('inplace.json', (j) => {
          (j.job.web.group.app as Record<string, unknown>).update = { max_parallel: 2 };
        });
        const r = await cli(['job', 'plan', 'inplace.json']);
        expect(r.stdout).toContain('Task Group: "app" (2 in-place update)');
        expect(r.stdout).toContain('job version 0 => 1');
        expect(r.code).toBe(0);
      });

      it('exits 255 on an error: a bad file, an agent that is not there, a usage mistake', async () => {
        fs.writeFileSync(path.join(dir, 'bad.json'), JSON.stringify({ job: { web: { group: { app: { count: 0, task: {} } } } } }));
        let r = await cli(['job', 'plan', 'bad.json']);
        expect(r.code).toBe(255);
        expect(r.stderr).toMatch(/^Error: bad\.json: .*count/);
        r = await cli(['job', 'plan', 'web.json'], { env: { CSIPLUG_ADDR: 'http://127.0.0.1:1' } });
        expect(r.code).toBe(255);
        expect(r.stderr).toMatch(/^Error: /);
        r = await cli(['job', 'plan']);
        expect(r.code).toBe(255);
        expect(r.stderr).toMatch(/takes 1 argument/);
        expect(fake.calls).toEqual([]);
      });
    });

    it('job run takes HCL, and - for stdin', async () => {
      const hcl = fs.readFileSync(path.join(EXAMPLES, 'workload.nomad.hcl'), 'utf8');
      const r = await cli(['job', 'run', '-'], { stdin: hcl });
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/Job "workload" registered/);
      const r2 = await cli(['job', 'run', path.join(EXAMPLES, 'hostpath-plugin.nomad.hcl')]);
      expect(r2.code).toBe(0);
      expect([...fake.jobs.keys()].sort()).toEqual(['hostpath-plugin', 'workload']);
    });

    it('job run refuses a bad file locally and posts nothing', async () => {
      fs.writeFileSync(path.join(dir, 'bad.json'), JSON.stringify({ job: { web: { group: { app: { count: 0, task: {} } } } } }));
      let r = await cli(['job', 'run', 'bad.json']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^Error: bad\.json: .*count/);
      r = await cli(['job', 'run', 'missing.hcl']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/cannot read missing\.hcl: no such file/);
      expect(fake.calls).toEqual([]);
    });

    it('job validate checks a file without the agent', async () => {
      const r = await cli(['job', 'validate', 'web.json'], { env: { CSIPLUG_ADDR: 'http://127.0.0.1:1' } });
      expect(r.code).toBe(0);
      expect(r.stdout).toBe('Job validation successful: job "web" with 1 group(s)\n');
      expect((await cli(['job', 'validate', '-address', url, 'web.json'])).code).toBe(1);
    });

    it('job status lists jobs as a table, or as JSON', async () => {
      expect((await cli(['job', 'status'])).stdout).toBe('No jobs\n');
      await cli(['job', 'run', 'web.json']);
      const r = await cli(['job', 'status']);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe('ID   Name  Status   Groups  Running/Total\nweb  web   running  1       2/2\n');
      const j = await cli(['job', 'status', '-json']);
      expect(JSON.parse(j.stdout).map((x: { id: string }) => x.id)).toEqual(['web']);
    });

    it('job status ID shows the job and its allocations', async () => {
      await cli(['job', 'run', 'web.json']);
      const [a1, a2] = [fakeUuid(1), fakeUuid(2)];
      const r = await cli(['job', 'status', 'web']);
      expect(r.stdout).toBe(
        [
          'ID      = web',
          'Name    = web',
          'Status  = running',
          'Version = 0',
          'Groups  = app (count 2)',
          '',
          'Allocations',
          'ID        Name        Group  Version  Desired  Status',
          `${a1.slice(0, 8)}  web.app[0]  app    0        run      running`,
          `${a2.slice(0, 8)}  web.app[1]  app    0        run      running`,
          '',
        ].join('\n'),
      );
      expect((await cli(['job', 'status', '-verbose', 'web'])).stdout).toContain(a1);
      expect(JSON.parse((await cli(['job', 'status', 'web', '--json'])).stdout).allocs).toHaveLength(2);
    });

    it("job status ID shows the job's latest deployment", async () => {
      await cli(['job', 'run', 'web.json']);
      fake.jobs.get('web')!.deployment = {
        id: 'd0d0d0d0-1111-4222-8333-444455556666',
        jobVersion: 0,
        status: 'failed',
        description: 'Failed due to unhealthy allocations - rolling back to job version 3',
        createdAt: Date.UTC(2026, 0, 2, 3, 4, 5),
        updatedAt: Date.UTC(2026, 0, 2, 3, 9, 5),
        groups: [{ name: 'app', desired: 2, placed: 1, healthy: 0, unhealthy: 1 }],
      };
      const r = await cli(['job', 'status', 'web']);
      expect(r.stdout).toContain(
        [
          'Latest Deployment',
          'ID          = d0d0d0d0',
          'Version     = 0',
          'Status      = failed',
          'Description = Failed due to unhealthy allocations - rolling back to job version 3',
          'Started     = 2026-01-02T03:04:05Z',
          '',
          'Deployed',
          'Task Group  Desired  Placed  Healthy  Unhealthy',
          'app         2        1       0        1',
          '',
          'Allocations',
        ].join('\n'),
      );
    });

    it('job status of an unknown job fails with the API message', async () => {
      const r = await cli(['job', 'status', 'ghost']);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe('Error: job "ghost" not found\n');
    });

    it('job stop ID stops; -purge purges', async () => {
      await cli(['job', 'run', 'web.json']);
      let r = await cli(['job', 'stop', 'web']);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe('==> Job "web" stopped (2 allocations)\n');
      r = await cli(['job', 'stop', 'web', '--purge', '-json']);
      expect(JSON.parse(r.stdout).status).toBe('dead');
      expect(fake.calls).toEqual(['runJob web', 'stopJob web', 'stopJob web purge']);
      expect((await cli(['job', 'stop', 'web'])).code).toBe(1);
    });

    it('job stop names each volume whose unmount is pending, the plugin it waits for, and what to do when that plugin is away', async () => {
      await cli(['job', 'run', 'web.json']);
      const stop = fake.stopJob.bind(fake);
      fake.stopJob = async (id, options) => ({
        ...(await stop(id, options)),
        volumeUnmountsPending: [
          { allocId: fakeUuid(1), name: 'data', volumeId: 'vol-p', pluginId: 'hostpath', pluginAway: true },
          { allocId: fakeUuid(2), name: 'logs', volumeId: 'vol-q', pluginId: 'nfs', lastError: 'timed out' },
        ],
      });
      const r = await cli(['job', 'stop', 'web']);
      expect(r).toEqual({
        code: 0,
        stderr: '',
        stdout:
          '==> Job "web" stopped (2 allocations)\n' +
          `    Allocation "${fakeUuid(1).slice(0, 8)}" stopped, but the unmount of its volume "vol-p" (volume "data") waits for ` +
          'node plugin "hostpath", which is not running on this node: the volume stays mounted and claimed, and is unmounted and released ' +
          'once the plugin is back (start the job that runs plugin "hostpath")\n' +
          `    Allocation "${fakeUuid(2).slice(0, 8)}" stopped, but the unmount of its volume "vol-q" (volume "logs") is pending: ` +
          'node plugin "nfs" is here and the unmount is retried (last error: timed out)\n',
      });
    });

    it('job status ID lists the pending unmounts after the allocations', async () => {
      await cli(['job', 'run', 'web.json']);
      const get = fake.getJob.bind(fake);
      fake.getJob = (id) => {
        const job = get(id);
        return (
          job && {
            ...job,
            volumeUnmountsPending: [{ allocId: fakeUuid(1), name: 'data', volumeId: 'vol-p', pluginId: 'hostpath', pluginAway: true }],
          }
        );
      };
      const r = await cli(['job', 'status', 'web']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(
        '\n\nVolume Unmounts Pending\n' +
          `    Allocation "${fakeUuid(1).slice(0, 8)}": the unmount of its volume "vol-p" (volume "data") waits for node plugin "hostpath", ` +
          'which is not running on this node: the volume stays mounted and claimed, and is unmounted and released once the plugin is back ' +
          '(start the job that runs plugin "hostpath")\n',
      );
    });
  });

  describe('job validate reports every problem', () => {
    const BAD_HCL = `job "web" {
  region = "eu"

  group "app" {
    count = 0

    task "server" {
      driver = "docker"

      config {
        image = "nginx:1.25"
        ports = ["http"]
      }

      kill_signal = "SIGFOO"
    }
  }
}
`;
    const PROBLEMS = [
      'Error: bad.hcl: job "web": region is not supported: csiplug runs every job on this one node, so there is nothing to choose; remove it',
      'Error: bad.hcl: job "web" group "app": count must be at least 1 (got 0)',
      'Error: bad.hcl: job "web" group "app" task "server": config.ports is not supported: csiplug runs images on runc itself, with no Docker daemon: there are no port mappings or container networks; use network_mode = "host" (the host\'s network) and let the program listen on its port; remove it',
      'Error: bad.hcl: job "web" group "app" task "server": kill_signal must be a signal name like SIGTERM or SIGINT (got "SIGFOO")',
    ];

    beforeEach(() => fs.writeFileSync(path.join(dir, 'bad.hcl'), BAD_HCL));

    it('prints each problem on its own Error line, in the order of the file, and exits 1', async () => {
      const r = await cli(['job', 'validate', 'bad.hcl'], { noAddress: true });
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(`${PROBLEMS.join('\n')}\n`);
    });

    it('job run and job plan print them all too, and send nothing', async () => {
      const run = await cli(['job', 'run', 'bad.hcl']);
      expect(run.code).toBe(1);
      expect(run.stderr).toBe(`${PROBLEMS.join('\n')}\n`);
      const plan = await cli(['job', 'plan', 'bad.hcl']);
      expect(plan.code).toBe(255);
      expect(plan.stderr).toBe(`${PROBLEMS.join('\n')}\n`);
      expect(fake.calls).toEqual([]);
    });

    it('a file with one problem fails as before: one Error line', async () => {
      fs.writeFileSync(
        path.join(dir, 'one.json'),
        JSON.stringify({ job: { web: { group: { app: { ...JOB_JSON.job.web.group.app, count: 0 } } } } }),
      );
      const r = await cli(['job', 'validate', 'one.json']);
      expect(r).toEqual({ code: 1, stdout: '', stderr: 'Error: one.json: job "web" group "app": count must be at least 1 (got 0)\n' });
    });
  });

  describe('job run watches the deployment', () => {
    // The fake runs a job at once and starts no deployment. Here its runs
    // start one, as the agent does: the allocs it places begin pending, and
    // move on one scripted step per look the CLI takes at the job's
    // allocations, so a test says what the agent reports at each look.
    const DEPLOYMENT = 'd0d0d0d0-1111-4222-8333-444455556666';
    type Step = (allocs: AllocView[], job: JobView) => void;
    let steps: Step[];
    let looks: number;

    beforeEach(() => {
      steps = [];
      looks = 0;
      const run = fake.runJob.bind(fake);
      fake.runJob = async (job, options) => {
        const r = await run(job, options);
        if (r.allocIds.length === 0) return r;
        const now = Date.now();
        fake.jobs.get(job.id)!.deployment = {
          id: DEPLOYMENT,
          jobVersion: r.version,
          status: 'running',
          description: 'Deployment is running',
          createdAt: now,
          updatedAt: now,
          groups: [{ name: 'app', desired: r.allocIds.length, placed: r.allocIds.length, healthy: 0, unhealthy: 0 }],
        };
        for (const id of r.allocIds) {
          const a = fake.allocs.get(id)!;
          Object.assign(a, { deploymentId: DEPLOYMENT, clientStatus: 'pending', createdAt: now });
          for (const t of Object.values(a.tasks))
            Object.assign(t, {
              state: 'pending',
              startedAt: undefined,
              events: [{ type: 'Received', message: 'Task received by client', time: now }],
            });
        }
        return { ...r, deploymentId: DEPLOYMENT };
      };
      const list = fake.listAllocs.bind(fake);
      fake.listAllocs = () => {
        const step = steps[looks++];
        if (step)
          step(
            [...fake.allocs.values()].filter((a) => a.deploymentId === DEPLOYMENT),
            fake.jobs.get('web')!,
          );
        return list();
      };
    });

    /** An event of the alloc as a whole, which the agent records in each of its tasks. */
    const allocEvent = (a: AllocView, type: string, message: string, failed?: boolean) => {
      // One time for all its tasks, as the agent records it (the clock may tick between two tasks).
      const time = Date.now();
      for (const t of Object.values(a.tasks)) t.events.push({ type, message, time, ...(failed ? { failed } : {}) });
    };
    let pid = 100;
    /** Each task started, with its own pid (as the agent's events say). */
    const start = (a: AllocView) => {
      for (const t of Object.values(a.tasks))
        Object.assign(t, {
          state: 'running',
          startedAt: Date.now(),
          events: [...t.events, { type: 'Started', message: `task started (pid ${++pid})`, time: Date.now() }],
        });
      a.clientStatus = 'running';
    };
    const settle = (job: JobView, status: 'successful' | 'failed', description: string, healthy: number, unhealthy: number) =>
      Object.assign(job.deployment!, { status, description, groups: [{ name: 'app', desired: 2, placed: 2, healthy, unhealthy }] });
    const ids = () => [fakeUuid(1), fakeUuid(2)].map((id) => id.slice(0, 8));

    it('prints each new event once, with the alloc and its time, until the deployment succeeds; exits 0', async () => {
      const [a1, a2] = ids();
      steps = [
        () => undefined,
        ([first]) =>
          allocEvent(first!, 'Waiting for plugin', 'volume "data" (vol1) waits for its node plugin hostpath to be healthy (up to 5m)'),
        ([first]) => {
          allocEvent(first!, 'Plugin ready', 'node plugin hostpath is healthy');
          allocEvent(first!, 'Volume mounted', 'volume "data" (vol1) mounted at /var/lib/csiplug/x');
        },
        (allocs) => allocs.forEach(start),
        () => undefined,
        (allocs, job) => {
          for (const a of allocs) a.deploymentStatus = { healthy: true, time: Date.now() };
          settle(job, 'successful', 'Deployment completed successfully', 2, 0);
        },
      ];
      const r = await cli(['job', 'run', 'web.json']);
      expect(r.code).toBe(0);
      const lines = r.stdout.split('\n');
      const at = (text: string) => {
        const matching = lines.filter((l) => l.includes(text));
        expect(matching).toHaveLength(1);
        expect(matching[0]).toMatch(/^ {4}\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: Allocation "/);
        return lines.indexOf(matching[0]!);
      };
      expect(lines.slice(0, 4)).toEqual([
        '==> Job "web" registered (version 0)',
        `    Allocation "${fakeUuid(1)}" created`,
        `    Allocation "${fakeUuid(2)}" created`,
        '==> Monitoring deployment "d0d0d0d0" (Ctrl-C stops watching; the job goes on)',
      ]);
      // An event of the whole alloc is in each of its tasks, and seen at every look: printed once, without a task name.
      const order = [
        at(`Allocation "${a1}": Received: Task received by client`),
        at(`Allocation "${a1}": Waiting for plugin: volume "data" (vol1) waits for its node plugin hostpath`),
        at(`Allocation "${a1}": Plugin ready: node plugin hostpath is healthy`),
        at(`Allocation "${a1}": Volume mounted: volume "data" (vol1) mounted at /var/lib/csiplug/x`),
        at(`Allocation "${a1}" task "main": Started: task started (pid`),
        at(`Allocation "${a1}" task "side": Started: task started (pid`),
        at(`Allocation "${a1}" status changed: "pending" -> "running"`),
        at(`Allocation "${a1}" is healthy`),
      ];
      expect([...order].sort((x, y) => x - y)).toEqual(order);
      at(`Allocation "${a2}" task "main": Started: task started (pid`);
      at(`Allocation "${a2}" is healthy`);
      expect(r.stdout).toMatch(
        /==> Deployment "d0d0d0d0" successful\n {4}Task Group  Desired  Placed  Healthy  Unhealthy\n {4}app {9}2 {8}2 {7}2 {8}0\n$/,
      );
      // The verdict written at the sixth look is read at the next (the job before its allocations), and the watch ends there.
      expect(looks).toBe(7);
    });

    it('exits 2 when an alloc fails, with why and where to look', async () => {
      const [a1] = ids();
      const why = 'Exceeded allowed attempts 0 in interval 30m and mode is "fail"; task exited: exit code 1';
      steps = [
        (allocs) => allocs.forEach(start),
        ([first], job) => {
          const main = first!.tasks.main!;
          main.events.push(
            { type: 'Terminated', message: 'task exited: exit code 1', time: Date.now() },
            { type: 'Not Restarting', message: why, time: Date.now(), failed: true },
          );
          Object.assign(main, { state: 'dead', failed: true, exitCode: 1 });
          first!.clientStatus = 'failed';
          first!.deploymentStatus = { healthy: false, time: Date.now(), reason: `task "main" is dead (failed): Not Restarting (${why})` };
          settle(
            job,
            'failed',
            'Failed due to unhealthy allocations - auto_revert is off for group "app": the rollout stops here and the old allocs still running are left running',
            0,
            1,
          );
        },
      ];
      const r = await cli(['job', 'run', 'web.json']);
      expect(r.code).toBe(2);
      expect(r.stdout).toContain(`Allocation "${a1}" task "main": Not Restarting: ${why}\n`);
      expect(r.stdout).toContain(`Allocation "${a1}" status changed: "running" -> "failed"\n`);
      expect(r.stdout).toContain(
        '==> Deployment "d0d0d0d0" failed: Failed due to unhealthy allocations - auto_revert is off for group "app"',
      );
      expect(r.stdout).toContain(`    Allocation "${a1}" (web.app[0]) failed: task "main": Not Restarting: ${why}\n`);
      expect(r.stdout).toContain(`    See 'csiplug alloc status ${a1}' and 'csiplug alloc logs -stderr ${a1} main'\n`);
    });

    it('job run -h says how it watches and how it exits, with -detach and -monitor-timeout', async () => {
      const r = await cli(['job', 'run', '-h']);
      expect(r.stdout).toMatch(/Exits\s+0\s+when\s+it\s+succeeded;\s+2\s+when\s+it\s+failed/);
      expect(r.stdout).toMatch(/\n {2}-detach\n/);
      expect(r.stdout).toMatch(/\n {2}-monitor-timeout=<duration>\n[\s\S]*exit\s+0:\s+the\s+deployment\s+goes\s+on/);
    });

    it('exits 2 when a newer run replaces the deployment', async () => {
      steps = [
        () => undefined,
        (_allocs, job) => {
          job.deployment = { ...job.deployment!, id: 'e1e1e1e1-1111-4222-8333-444455556666', jobVersion: 1, createdAt: Date.now() };
        },
      ];
      const r = await cli(['job', 'run', 'web.json']);
      expect(r.code).toBe(2);
      expect(r.stdout).toContain('==> Deployment "d0d0d0d0" was cancelled: deployment "e1e1e1e1" of version 1 replaced it\n');
    });

    it('-detach returns once the job is submitted; -json prints the submission; neither watches', async () => {
      const r = await cli(['job', 'run', '-detach', 'web.json']);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(
        `==> Job "web" registered (version 0)\n    Allocation "${fakeUuid(1)}" created\n    Allocation "${fakeUuid(2)}" created\n    Deployment "d0d0d0d0" is rolling it out: see 'csiplug job status web'\n`,
      );
      await cli(['job', 'stop', '-purge', 'web']);
      const j = await cli(['job', 'run', '-json', 'web.json']);
      expect(j.code).toBe(0);
      expect(JSON.parse(j.stdout)).toMatchObject({ jobId: 'web', deploymentId: DEPLOYMENT, unchanged: false });
      expect(looks).toBe(0);
      // -detach asks the agent to queue a placement that must wait for a held write claim (?queue=true); -json does not.
      expect(fake.calls.filter((c) => c.startsWith('runJob'))).toEqual(['runJob web queue', 'runJob web']);
    });

    it('an unchanged job returns at once', async () => {
      await cli(['job', 'run', '-detach', 'web.json']);
      const r = await cli(['job', 'run', 'web.json']);
      expect(r).toEqual({ code: 0, stdout: '==> Job "web" unchanged (version 0): nothing to do\n', stderr: '' });
      expect(looks).toBe(0);
    });

    it('stops watching at -monitor-timeout, saying the deployment goes on, and exits 0', async () => {
      const r = await cli(['job', 'run', '-monitor-timeout', '1s', 'web.json']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(
        /==> Stopped watching after 1s: deployment "d0d0d0d0" is still running and goes on\. Follow it with 'csiplug job status web'\n$/,
      );
      expect(looks).toBeGreaterThan(0);
      const bad = await cli(['job', 'run', '-monitor-timeout', 'soon', 'web.json']);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toMatch(/^Error: -monitor-timeout: cannot parse duration "soon".*\(0 watches until the deployment ends\)/);
      expect(fake.calls).toEqual(['runJob web']);
    });

    it('asks a restarted agent again and carries on', async () => {
      const port = Number(new URL(url).port);
      let restarted: Promise<void> | undefined;
      steps = [
        () => undefined,
        // The agent goes away after this look…
        () => void setImmediate(() => void api.dispose()),
        () => undefined,
        (allocs, job) => {
          allocs.forEach(start);
          for (const a of allocs) a.deploymentStatus = { healthy: true, time: Date.now() };
          settle(job, 'successful', 'Deployment completed successfully', 2, 0);
        },
      ];
      let stderr = '';
      const io: CliIo = {
        stdout: { write: () => true },
        stderr: {
          write: (s: string | Uint8Array) => {
            stderr += s;
            // …and comes back on its port once the CLI has found it gone.
            if (!restarted && stderr.includes('does not answer')) {
              api = new HttpApi(fake, { bindAddr: '127.0.0.1', port, logger: new MemoryLogger() });
              restarted = api.listen().then(() => undefined);
            }
            return true;
          },
        },
        env: { CSIPLUG_ADDR: url },
        cwd: dir,
      };
      expect(await main(['job', 'run', 'web.json'], io)).toBe(0);
      await restarted;
      expect(stderr).toMatch(
        new RegExp(
          `^ {4}\\(the agent at ${url} does not answer: cannot reach the csiplug agent at ${url}: .*; asking again for up to 30s\\)\\n {4}\\(the agent answers again\\)\\n$`,
        ),
      );
    });
  });

  describe('alloc', () => {
    beforeEach(async () => {
      await cli(['volume', 'register', 'vol.hcl']);
      await cli(['job', 'run', 'web.json']);
    });

    it('alloc status shows tasks, recent events and volumes; a prefix will do', async () => {
      const id = fakeUuid(1);
      const r = await cli(['alloc', 'status', id.slice(0, 6)]);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`ID             = ${id}\n`);
      expect(r.stdout).toContain('Client Status  = running\n');
      expect(r.stdout).toMatch(
        /CSI Volumes:\nName\s+Volume ID\s+Plugin ID\s+Read Only\s+Used\s+Host Path\ndata\s+vol1\s+hostpath\s+false\s+<none>\s+\/var\/lib/,
      );
      expect(r.stdout).toContain('Task "main" is "running"');
      expect(r.stdout).toContain('Task "side" is "running"');
      expect(r.stdout).toMatch(
        /Recent Events:\nTime\s+Type\s+Description\n2026-01-01T00:00:00Z\s+Started\s+Task started by client\n2026-01-01T00:00:00Z\s+Received/,
      );
      // Created as Nomad prints it: how long ago (prettyTimeDiff), the time itself with -verbose.
      expect(r.stdout).toMatch(/\nCreated {8}= (\d+(y|mo|d|h|m|s)){1,2} (ago|from now)\n/);
      expect((await cli(['alloc', 'status', '-verbose', id])).stdout).toContain('Created        = 2026-01-01T00:00:00Z\n');
      const j = await cli(['alloc', 'status', '-json', id]);
      expect(JSON.parse(j.stdout).id).toBe(id);
    });

    it('alloc status refuses an unknown id and an ambiguous prefix', async () => {
      let r = await cli(['alloc', 'status', 'zzzz']);
      expect(r.code).toBe(1);
      expect(r.stderr).toBe('Error: no alloc with id or id prefix "zzzz"\n');
      // Enough allocs that two share a first hex digit.
      await cli(['job', 'run', 'web.json']);
      for (let i = 0; i < 8; i++) {
        fs.writeFileSync(
          path.join(dir, `j${i}.json`),
          JSON.stringify({ job: { [`j${i}`]: JOB_JSON.job.web } }).replace(/"source":"vol1"/, '"source":"none"'),
        );
        await cli(['job', 'run', `j${i}.json`]);
      }
      const ids = [...fake.allocs.keys()];
      const prefix = ids.map((i) => i[0]!).find((c, i, all) => all.indexOf(c) !== i)!;
      r = await cli(['alloc', 'status', prefix]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(new RegExp(`^Error: the prefix "${prefix}" matches \\d+ allocs`));
    });

    it('alloc logs ID TASK prints stdout, or stderr with -stderr', async () => {
      const id = fakeUuid(1);
      fake.logs.set(`${id}/main/stdout`, 'out line\n');
      fake.logs.set(`${id}/main/stderr`, 'err line\n');
      expect(await cli(['alloc', 'logs', id, 'main'])).toEqual({ code: 0, stdout: 'out line\n', stderr: '' });
      expect((await cli(['alloc', 'logs', id, 'main', '-stderr'])).stdout).toBe('err line\n');
      expect((await cli(['alloc', 'logs', '--stderr', id.slice(0, 8), 'main'])).stdout).toBe('err line\n');
      expect((await cli(['alloc', 'logs', '-offset=4', id, 'main'])).stdout).toBe('line\n');
      expect(JSON.parse((await cli(['alloc', 'logs', '-json', id, 'main'])).stdout)).toMatchObject({
        task: 'main',
        stream: 'stdout',
        data: 'out line\n',
      });
    });

    it('alloc logs of a task not started yet prints nothing (the agent answers 404: no log yet)', async () => {
      const id = fakeUuid(1);
      const alloc = fake.allocs.get(id)!;
      alloc.tasks['main'] = { ...alloc.tasks['main']!, state: 'pending', startedAt: undefined };
      alloc.clientStatus = 'failed';
      expect(await cli(['alloc', 'logs', id, 'main'])).toEqual({ code: 0, stdout: '', stderr: '' });
      // -f on an alloc that ended without starting the task: nothing to wait for.
      expect(await cli(['alloc', 'logs', '-f', id, 'main'])).toEqual({ code: 0, stdout: '', stderr: '' });
      expect(JSON.parse((await cli(['alloc', 'logs', '-json', id, 'main'])).stdout)).toMatchObject({ task: 'main', data: '', size: 0 });
    });

    it('alloc logs picks a byte range with -offset, -limit and -tail', async () => {
      const id = fakeUuid(1);
      fake.logs.set(`${id}/main/stdout`, '0123456789');
      expect((await cli(['alloc', 'logs', '-offset', '2', '-limit', '3', id, 'main'])).stdout).toBe('234');
      expect((await cli(['alloc', 'logs', '-tail', '-offset', '4', id, 'main'])).stdout).toBe('6789');
      expect((await cli(['alloc', 'logs', '-tail', '-offset', '4', '-limit', '2', id, 'main'])).stdout).toBe('67');
      expect((await cli(['alloc', 'logs', '-tail', id, 'main'])).stdout).toBe('0123456789');
      expect((await cli(['alloc', 'logs', '-offset', '99', id, 'main'])).stdout).toBe('');
      const json = JSON.parse((await cli(['alloc', 'logs', '-json', '-tail', '-offset', '3', id, 'main'])).stdout);
      expect(json).toEqual({ allocId: id, task: 'main', stream: 'stdout', offset: 7, nextOffset: 10, size: 10, data: '789' });
    });

    it("node status shows this node, its drivers and its plugins as fingerprinted; -json the API's NodeView", async () => {
      let r = await cli(['node', 'status']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^ID +=/);
      expect(r.stdout).toMatch(
        /Drivers\nDriver\s+Detected\s+Healthy\s+Description\nexec\s+true\s+true\s+isolated tasks on runc \(fake\)\nraw_exec\s+true\s+true\s+host processes/,
      );
      expect(r.stdout).toMatch(/CSI Plugins\n(Plugin ID[\s\S]*|No CSI plugins)/);
      r = await cli(['node', 'status', '-self', '-json']);
      expect(JSON.parse(r.stdout)).toMatchObject({ id: fake.nodeId, status: 'ready', drivers: { raw_exec: { detected: true } } });
    });

    it('node status in a cluster lists each node with its ID (its identity: 8 characters, all with -verbose); node purge says what the agent refused', async () => {
      const identity = '5653e025-d0e1-43a3-9b27-d7f2e08d5b97';
      fake.listNodes = async () => ({
        cluster: true,
        nodes: [
          { name: 'n1', identity, status: 'down', nodeClass: '', drivers: ['raw_exec'], plugins: [], self: false },
          { name: 'n2', status: 'ready', nodeClass: '', drivers: ['raw_exec'], plugins: [], self: true },
        ],
      });
      let r = await cli(['node', 'status']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^ID +Name +Class/);
      expect(r.stdout).toMatch(/\n5653e025 +n1 +/);
      expect(r.stdout).toMatch(/\n- +n2 \(this node\) +/);
      expect((await cli(['node', 'status', '-verbose'])).stdout).toContain(`${identity}  n1`);
      // The fake is one node on its own: no cluster to purge from (404, as the agent says it).
      r = await cli(['node', 'purge', 'n1']);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain('this agent is not in a cluster');
      expect(fake.calls).toContain('purgeNode n1');
      expect((await cli(['node', 'purge'])).stderr).toMatch(/NODE/);
    });

    it('alloc logs -n prints the last lines; -f follows what the task writes until the alloc ends', async () => {
      const id = fakeUuid(1);
      fake.logs.set(`${id}/main/stdout`, Array.from({ length: 2000 }, (_, i) => `line ${i}`).join('\n') + '\n');
      expect((await cli(['alloc', 'logs', '-n', '3', id, 'main'])).stdout).toBe('line 1997\nline 1998\nline 1999\n');
      expect((await cli(['alloc', 'logs', '-n', '5000', id, 'main'])).stdout.split('\n')).toHaveLength(2001);
      expect((await cli(['alloc', 'logs', '-n', '0', id, 'main'])).stderr).toMatch(/-n must be a whole number of lines of at least 1/);
      expect((await cli(['alloc', 'logs', '-n', '2', '-json', id, 'main'])).stderr).toMatch(/cannot be used with -json/);
      // Follow: lines written while it runs are printed as they come; it ends once the alloc has ended.
      fake.logs.set(`${id}/main/stdout`, 'first\n');
      fake.allocs.get(id)!.clientStatus = 'running';
      const following = cli(['alloc', 'logs', '-f', id, 'main']);
      await new Promise((r) => setTimeout(r, 400));
      fake.logs.set(`${id}/main/stdout`, 'first\nsecond\n');
      await new Promise((r) => setTimeout(r, 400));
      fake.logs.set(`${id}/main/stdout`, 'first\nsecond\nlast words\n');
      fake.allocs.get(id)!.clientStatus = 'complete';
      const r = await following;
      expect(r).toEqual({ code: 0, stdout: 'first\nsecond\nlast words\n', stderr: '' });
    });

    it('alloc logs prints the bytes exactly, a character cut by the range included', async () => {
      const id = fakeUuid(1);
      const bytes = Buffer.concat([Buffer.from('héllo wörld ✓\n'), Buffer.from([0xff, 0xfe, 0x0a])]);
      fake.logs.set(`${id}/main/stdout`, bytes);
      const out: Buffer[] = [];
      const io: CliIo = {
        stdout: { write: (c: string | Uint8Array) => out.push(Buffer.from(c)) },
        stderr: { write: () => true },
        env: { CSIPLUG_ADDR: url },
      };
      expect(await main(['alloc', 'logs', id, 'main'], io)).toBe(0);
      expect(Buffer.concat(out)).toEqual(bytes);
      out.length = 0;
      expect(await main(['alloc', 'logs', '-offset', '2', '-limit', '3', id, 'main'], io)).toBe(0);
      expect(Buffer.concat(out)).toEqual(bytes.subarray(2, 5));
    });

    it('alloc logs refuses bad byte counts, and -json with a limit over its maximum', async () => {
      const id = fakeUuid(1);
      expect((await cli(['alloc', 'logs', '-limit', '0', id, 'main'])).stderr).toMatch(
        /-limit must be a whole number of bytes of at least 1 \(got "0"\)/,
      );
      expect((await cli(['alloc', 'logs', '-limit', '-5', id, 'main'])).stderr).toMatch(/-limit must be a whole number/);
      const big = await cli(['alloc', 'logs', '-json', '-limit', String(8 * 1024 * 1024), id, 'main']);
      expect(big.code).toBe(1);
      expect(big.stderr).toMatch(/-limit over 4194304 bytes \(4 MiB\) cannot be used with -json; leave out -json/);
      expect((await cli(['alloc', 'logs', '-limit', String(8 * 1024 * 1024), id, 'main'])).code).toBe(0);
    });

    it('alloc logs needs TASK when the alloc has several, and names them', async () => {
      const r = await cli(['alloc', 'logs', fakeUuid(1)]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/has 2 tasks \(main, side\); name the TASK/);
      const unknown = await cli(['alloc', 'logs', fakeUuid(1), 'nope']);
      expect(unknown.code).toBe(1);
      expect(unknown.stderr).toMatch(/unknown task name "nope": the alloc.s tasks are main, side/);
      expect((await cli(['alloc', 'logs', '-offset', 'x', fakeUuid(1), 'main'])).stderr).toMatch(/-offset must be a whole number/);
    });
  });

  describe('plugin', () => {
    beforeEach(() => {
      fake.addPlugin({
        id: 'hostpath',
        provider: 'hostpath.csi.k8s.io',
        controllerRequired: true,
        controllersHealthy: 1,
        controllersExpected: 1,
        node: {
          healthy: true,
          allocId: fakeUuid(9),
          description: 'healthy',
          version: '1.2.0',
          info: { 'Node ID': 'n1', 'Max Volumes': 'unlimited', Topology: 'zone=a' },
        },
        controller: { healthy: true, allocId: fakeUuid(9), description: 'healthy', version: '1.2.0', info: { supportsCreateDelete: true } },
        allocs: [fakeUuid(9)],
      });
      fake.addPlugin({ id: 'nfs', provider: undefined, nodesHealthy: 0, nodesExpected: 2 });
    });

    it('plugin status lists healthy/expected counts', async () => {
      const r = await cli(['plugin', 'status']);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(
        [
          'ID        Provider             Controllers Healthy/Expected  Nodes Healthy/Expected',
          'hostpath  hostpath.csi.k8s.io  1/1                           1/1',
          'nfs       <none>               0/0                           0/2',
          '',
        ].join('\n'),
      );
      expect(JSON.parse((await cli(['plugin', 'status', '-json'])).stdout)).toHaveLength(2);
    });

    it('plugin status ID shows node and controller details', async () => {
      const r = await cli(['plugin', 'status', 'hostpath']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain('Controllers Healthy  = 1\n');
      expect(r.stdout).toContain('Nodes Expected       = 1\n');
      expect(r.stdout).toMatch(/Controller\nHealthy\s+= true\nAlloc ID\s+= [0-9a-f]{8}\n/);
      expect(r.stdout).toContain('supportsCreateDelete = true');
      expect(r.stdout).toMatch(/Node\nHealthy\s+= true/);
      expect(r.stdout).toMatch(/Topology\s+= zone=a\n/);
      expect(r.stdout).toContain(`Allocations\nID\n${fakeUuid(9).slice(0, 8)}\n`);
      const none = await cli(['plugin', 'status', 'nfs']);
      expect(none.stdout).toContain('Node\nNone');
      expect(none.stdout).not.toContain('Controller\n');
      expect((await cli(['plugin', 'status', 'ghost'])).stderr).toBe('Error: plugin "ghost" not found\n');
    });
  });

  describe('volume', () => {
    it('volume register FILE, status, deregister', async () => {
      let r = await cli(['volume', 'register', 'vol.hcl']);
      expect(r).toEqual({ code: 0, stdout: 'Volume "vol1" registered (external id ext-1)\n', stderr: '' });
      r = await cli(['volume', 'status']);
      expect(r.stdout).toBe(
        'ID    Name  Plugin ID  Schedulable  Access Mode         Claims\nvol1  vol1  hostpath   true         single-node-writer  0\n',
      );
      r = await cli(['volume', 'status', 'vol1']);
      expect(r.stdout).toContain('External ID   = ext-1\n');
      expect(r.stdout).toContain('Capabilities  = single-node-writer/file-system\n');
      expect(r.stdout).toContain('Claims\nNo claims\n');
      r = await cli(['volume', 'deregister', 'vol1']);
      expect(r.stdout).toBe('Successfully deregistered volume "vol1"\n');
      expect((await cli(['volume', 'status'])).stdout).toBe('No CSI volumes\n');
    });

    it('volume snapshot create, list (a page at a time), delete; volume detach; volume status -type csi; -json for each', async () => {
      await cli(['volume', 'register', 'vol.hcl']);
      let r = await cli(['volume', 'snapshot', 'create', 'vol1', 'nightly']);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(
        /^Snapshotted volume vol1 with snapshot ID snap-nightly\n\nSnapshot ID\s+Plugin ID\s+Source Volume\s+Size\s+Created\s+Ready\nsnap-nightly\s+hostpath\s+vol1\s+0 B\s+\S+\s+true\n$/,
      );
      await cli(['volume', 'snapshot', 'create', 'vol1', 'weekly']);
      r = await cli(['volume', 'snapshot', 'list', '-per-page', '1']);
      expect(r.stdout).toMatch(/snap-nightly[\s\S]*Next page: -page-token 1\n$/);
      r = await cli(['volume', 'snapshot', 'list', '-json', '-per-page', '1', '-page-token', '1']);
      expect(JSON.parse(r.stdout)).toMatchObject({ Snapshots: [{ id: 'snap-weekly' }], NextToken: '' });
      expect((await cli(['volume', 'snapshot', 'list', '-per-page', 'x'])).stderr).toMatch(
        /-per-page must be a whole number above 0, got "x"/,
      );
      r = await cli(['volume', 'snapshot', 'delete', 'hostpath', 'snap-nightly']);
      expect(r.stdout).toBe('Deleted snapshot snap-nightly of plugin hostpath\n');
      expect((await cli(['volume', 'snapshot', 'bogus'])).stderr).toMatch(
        /unknown command "volume snapshot bogus"[\s\S]*volume snapshot create/,
      );
      fake.externalVolumes.push(
        { pluginId: 'hostpath', externalId: 'ext-1', capacityBytes: 1 << 20, publishedNodeIds: ['n1'], volumeId: 'vol1' },
        { pluginId: 'hostpath', externalId: 'ext-stray' },
      );
      r = await cli(['volume', 'status', '-type', 'csi', '-plugin', 'hostpath']);
      expect(r.stdout).toMatch(
        /External ID\s+Plugin ID\s+Capacity\s+Published To\s+Condition\s+Registered As\next-1\s+hostpath\s+1\.0 MiB\s+n1\s+-\s+vol1\next-stray\s+hostpath\s+<none>\s+<none>\s+-\s+<none>\n/,
      );
      r = await cli(['volume', 'detach', 'vol1', 'node-1']);
      expect(r.stdout).toBe('Volume "vol1" had no claim on node node-1: nothing to detach\n');
      expect(fake.calls).toEqual(
        expect.arrayContaining(['createSnapshot vol1 nightly', 'deleteSnapshot hostpath snap-nightly', 'detachVolume vol1 node-1']),
      );
    });

    it("-secret and -parameter (Nomad's flags, each repeatable) reach the agent for snapshot create, delete, list and volume delete; a pair without '=' is refused; values are never printed", async () => {
      await cli(['volume', 'register', 'vol.hcl']);
      let r = await cli([
        'volume',
        'snapshot',
        'create',
        '-secret',
        'userID=admin',
        '-secret=userKey=AQD==',
        '-parameter',
        'clusterID=ceph-1',
        '-parameter',
        'csi.storage.k8s.io/snapshotter-secret-name=csi-rbd-secret',
        'vol1',
        'nightly',
      ]);
      expect(r.code).toBe(0);
      expect(r.stdout + r.stderr).not.toContain('AQD==');
      expect(fake.perCall.at(-1)).toEqual({
        call: 'createSnapshot vol1',
        secrets: { userID: 'admin', userKey: 'AQD==' },
        parameters: { clusterID: 'ceph-1', 'csi.storage.k8s.io/snapshotter-secret-name': 'csi-rbd-secret' },
      });
      r = await cli(['volume', 'snapshot', 'list', '-plugin', 'hostpath', '-secret', 'userID=lister']);
      expect(r.code).toBe(0);
      expect(fake.perCall.at(-1)).toEqual({ call: 'listSnapshots hostpath', secrets: { userID: 'lister' } });
      r = await cli(['volume', 'snapshot', 'delete', 'hostpath', 'snap-nightly', '-secret', 'userID=deleter']);
      expect(r.code).toBe(0);
      expect(fake.perCall.at(-1)).toEqual({ call: 'deleteSnapshot hostpath snap-nightly', secrets: { userID: 'deleter' } });
      r = await cli(['volume', 'snapshot', 'create', '-secret', 'no-equals-sign', 'vol1']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('Secret must be in the format: -secret key=value');
      r = await cli(['volume', 'snapshot', 'create', '-parameter', '=v', 'vol1']);
      expect(r.stderr).toContain('Parameter must be in the format: -parameter key=value');
      // A comma would reach the plugin as another secret (the header joins the pairs with commas): refused, the value not repeated.
      const calls = fake.perCall.length;
      for (const pair of ['userKey=a,b', 'user,Key=topsecret']) {
        r = await cli(['volume', 'delete', '-secret', pair, 'vol1']);
        expect(r).toMatchObject({ code: 1, stdout: '' });
        expect(r.stderr).toContain(
          'a -secret key or value cannot hold a comma (the pairs are sent joined by commas); give the secret without one',
        );
        expect(r.stderr).not.toContain(pair.split('=')[1]!);
      }
      expect(fake.perCall).toHaveLength(calls);
      r = await cli(['volume', 'delete', '-secret', 'userKey=gone', 'vol1']);
      expect(r).toEqual({ code: 0, stdout: 'Successfully deleted volume "vol1"\n', stderr: '' });
      expect(fake.perCall.at(-1)).toEqual({ call: 'deleteVolume vol1', secrets: { userKey: 'gone' } });
    });

    it('volume snapshot list of a plugin that does not list snapshots prints the error naming it, never "No snapshots"', async () => {
      fake.listSnapshots = async () => {
        throw new CsiplugError(
          'EVOLUME_UNSUPPORTED',
          'plugin "local-hostpath" does not list snapshots (its controller answered the list with UNIMPLEMENTED); the snapshots it holds cannot be shown here: see them on the storage system itself',
        );
      };
      const r = await cli(['volume', 'snapshot', 'list', '-plugin', 'local-hostpath']);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(
        'Error: plugin "local-hostpath" does not list snapshots (its controller answered the list with UNIMPLEMENTED); the snapshots it holds cannot be shown here: see them on the storage system itself\n',
      );
    });

    it('volume register of a registered volume says it was updated, claimed or not; claimed, that its claims are kept', async () => {
      await cli(['volume', 'register', 'vol.hcl']);
      expect(await cli(['volume', 'register', 'vol.hcl'])).toEqual({
        code: 0,
        stdout: 'Volume "vol1" updated (external id ext-1)\n',
        stderr: '',
      });
      fake.claim('vol1', 'a1');
      const r = await cli(['volume', 'register', 'vol.hcl']);
      expect(r).toEqual({
        code: 0,
        stdout: 'Volume "vol1" updated (external id ext-1); its claims are kept: the next mount uses the new secrets\n',
        stderr: '',
      });
    });

    it('volume init writes a commented example that volume create reads, and never overwrites', async () => {
      let r = await cli(['volume', 'init']);
      expect(r.code).toBe(0);
      const file = path.join(dir, 'volume.hcl');
      expect(fs.readFileSync(file, 'utf8')).toContain('capacity_min = "1GiB"');
      const spec = await parseVolumeSpec(fs.readFileSync(file, 'utf8'), 'volume.hcl');
      expect(spec).toMatchObject({
        id: 'database',
        pluginId: 'hostpath',
        capacityMin: 1 << 30,
        capabilities: [{ accessMode: 'single-node-writer' }],
      });
      r = await cli(['volume', 'init']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/volume\.hcl exists already/);
    });

    it('volume create FILE creates through the plugin', async () => {
      const r = await cli(['volume', 'create', path.join(EXAMPLES, 'volume.hcl')]);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe('Created external volume ext-vol-demo with ID vol-demo\n');
      const s = await cli(['volume', 'status', 'vol-demo']);
      expect(s.stdout).toContain('Capacity      = 10 MiB\n');
      const j = JSON.parse((await cli(['volume', 'status', '-json', 'vol-demo'])).stdout);
      expect(j).toMatchObject({ id: 'vol-demo', pluginId: 'hostpath', capacityBytes: 10 * 1024 * 1024 });
      expect(JSON.parse((await cli(['volume', 'delete', '-json', 'vol-demo'])).stdout)).toEqual({ id: 'vol-demo' });
      expect(fake.calls).toEqual(['createVolume vol-demo', 'deleteVolume vol-demo']);
    });

    it('volume status shows claims; deregister refuses a claimed volume unless -force', async () => {
      await cli(['volume', 'register', 'vol.hcl']);
      await cli(['job', 'run', 'web.json']);
      const s = await cli(['volume', 'status', 'vol1']);
      expect(s.stdout).toMatch(
        new RegExp(
          `Claims\\nAlloc ID\\s+Mode\\s+Access Mode\\s+Attachment Mode\\s+Since\\n${fakeUuid(1).slice(0, 8)}\\s+write\\s+single-node-writer`,
        ),
      );
      let r = await cli(['volume', 'deregister', 'vol1']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^Error: volume "vol1" is claimed/);
      r = await cli(['volume', 'delete', 'vol1']);
      expect(r.code).toBe(1);
      r = await cli(['volume', 'deregister', 'vol1', '-force']);
      expect(r.code).toBe(0);
      expect(fake.volumes.size).toBe(0);
    });

    it('volume status ID shows the mounts on this node, a pending unmount with its attempts and error', async () => {
      await cli(['volume', 'register', 'vol.hcl']);
      let r = await cli(['volume', 'status', 'vol1']);
      expect(r.stdout).toContain('Mounts\nNo mounts on this node\n');
      fake.volumes.get('vol1')!.mounts = [
        {
          allocId: fakeUuid(3),
          name: 'data',
          desired: 'unmounted',
          claimed: true,
          staged: true,
          published: false,
          pendingUnmount: true,
          attempts: 4,
          lastError: 'plugin hostpath not healthy',
          since: 0,
        },
        {
          allocId: fakeUuid(4),
          name: 'data',
          desired: 'mounted',
          claimed: true,
          staged: true,
          published: true,
          pendingUnmount: false,
          attempts: 0,
          since: 0,
          check: { state: 'stale', message: 'target answers ENOTCONN' },
        },
        {
          allocId: fakeUuid(5),
          name: 'data',
          desired: 'mounted',
          claimed: true,
          staged: true,
          published: true,
          pendingUnmount: false,
          attempts: 0,
          since: 0,
          check: { state: 'abnormal', message: 'plugin hostpath reports the volume abnormal; kept as it is' },
        },
      ];
      fake.usage.push({
        allocId: fakeUuid(4),
        name: 'data',
        volumeId: 'vol1',
        pluginId: 'hostpath',
        usage: { bytes: { total: 1 << 30, used: 1 << 20 }, condition: { abnormal: true, message: 'over quota' } },
      });
      r = await cli(['volume', 'status', 'vol1']);
      expect(r.stdout).toMatch(
        new RegExp(
          `Mounts\\nAlloc ID\\s+Name\\s+Desired\\s+Held\\s+Check\\s+Used\\s+Attempts\\s+Since\\s+Last Error\\n${fakeUuid(3).slice(0, 8)}\\s+data\\s+unmounted \\(pending\\)\\s+claimed,staged\\s+<none>\\s+-\\s+4\\s+.+plugin hostpath not healthy\\n`,
        ),
      );
      expect(r.stdout).toMatch(
        new RegExp(
          `${fakeUuid(4).slice(0, 8)}\\s+data\\s+mounted\\s+claimed,staged,published\\s+stale\\s+1\\.0 MiB of 1\\.0 GiB \\(0%\\); ABNORMAL: over quota\\s+0\\s+.+target answers ENOTCONN\\n`,
        ),
      );
      // A plugin's abnormal condition: its own check state, and what the plugin said.
      expect(r.stdout).toMatch(
        new RegExp(
          `${fakeUuid(5).slice(0, 8)}\\s+data\\s+mounted\\s+claimed,staged,published\\s+abnormal\\s+.+plugin hostpath reports the volume abnormal; kept as it is\\n`,
        ),
      );
    });

    it('volume register refuses a bad spec locally', async () => {
      fs.writeFileSync(path.join(dir, 'bad.hcl'), 'id = "v"\nplugin_id = "p"\ntype = "csi"\n');
      const r = await cli(['volume', 'register', 'bad.hcl']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^Error: bad\.hcl: .*capability is required/);
      expect(fake.calls).toEqual([]);
    });
  });
});
