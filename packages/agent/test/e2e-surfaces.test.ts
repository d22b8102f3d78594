// End to end through the real binary: the ACL, bad configs, bad jobspecs
// and API bodies (clear errors, nothing half-applied), a second agent on the
// same data dir, and the demo that `npm start` runs.
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as http from 'http';
import * as os from 'os';
import * as path from 'path';
import { promisify } from 'util';
import { ApiClient } from '@csiplug/api';
import { AgentHarness, BIN, freePort, mountsUnder } from './support/agent-process';

jest.setTimeout(180_000);
const run = promisify(execFile);

async function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, timeout: 120_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

function post(
  port: number,
  urlPath: string,
  body: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: urlPath, method: 'POST', headers: { 'content-type': 'application/json', ...headers } },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('the agent binary', () => {
  let tmp: string;
  beforeEach(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-e2e-'));
  });
  afterEach(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('refuses a bad config with the key named, and starts nothing', async () => {
    const bad = path.join(tmp, 'agent.hcl');
    fs.writeFileSync(bad, `data_dir = "${tmp}/data"\ntimeouts {\n  probe = "5 seconds"\n}\n`);
    const r1 = await cli(['agent', '-config', bad]);
    expect(r1.code).toBe(1);
    expect(r1.stderr).toMatch(/timeouts\.probe/);
    fs.writeFileSync(bad, `data_dri = "${tmp}/data"\n`);
    const r2 = await cli(['agent', '-config', bad]);
    expect(r2.code).toBe(1);
    expect(r2.stderr).toMatch(/data_dri/);
    expect(fs.existsSync(path.join(tmp, 'data'))).toBe(false);
  });

  it('a second agent on the same data dir fails fast with a clear message', async () => {
    const h = new AgentHarness();
    try {
      await h.start();
      const other = path.join(h.root, 'second.hcl');
      fs.writeFileSync(other, `data_dir = "${h.dataDir}"\nport = ${await freePort()}\n`);
      const r = await cli(['agent', '-config', other]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/data dir .* is in use: another csiplug agent holds its lock/);
      expect((await h.api.health()).ok).toBe(true);
    } finally {
      await h.cleanup();
    }
  });
});

describe('ACL and bad input against a running agent', () => {
  let h: AgentHarness;
  beforeAll(async () => {
    h = new AgentHarness('acl {\n  token = "s3cret-token"\n}');
    await h.start('s3cret-token');
  });
  afterAll(async () => {
    await h.cleanup();
  });

  it('every request needs the token: without it 403, with it 200', async () => {
    const anonymous = new ApiClient({ address: `http://127.0.0.1:${h.port}` });
    await expect(anonymous.listJobs()).rejects.toMatchObject({ status: 403 });
    const wrong = new ApiClient({ address: `http://127.0.0.1:${h.port}`, token: 'guess' });
    await expect(wrong.listJobs()).rejects.toMatchObject({ status: 403 });
    await expect(h.api.listJobs()).resolves.toEqual([]);
    await expect(h.api.stopJob('no-such-job')).rejects.toMatchObject({ status: 404 });
    await expect(h.api.getAlloc('no-such-alloc')).rejects.toMatchObject({ status: 404 });
    const denied = await cli(['job', 'status', '-address', `http://127.0.0.1:${h.port}`]);
    expect(denied.code).toBe(1);
    const allowed = await cli(['job', 'status', '-address', `http://127.0.0.1:${h.port}`], { CSIPLUG_TOKEN: 's3cret-token' });
    expect(allowed.code).toBe(0);
  });

  it('a bad jobspec is refused by the CLI with job, group, task and field named; nothing is run', async () => {
    const file = path.join(h.root, 'bad.hcl');
    fs.writeFileSync(
      file,
      'job "web" {\n  group "app" {\n    task "server" {\n      driver = "raw_exec"\n      config {\n        args = ["x"]\n      }\n    }\n  }\n}\n',
    );
    const r = await cli(['job', 'run', '-address', `http://127.0.0.1:${h.port}`, '-token', 's3cret-token', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/job "web" group "app" task "server".*config\.command/);
    expect(await h.api.listJobs()).toEqual([]);
  });

  it('bad API bodies get 400 with a message, and nothing is applied', async () => {
    const auth = { 'x-nomad-token': 's3cret-token' };
    const notJson = await post(h.port, '/v1/jobs', '{"Job": ', auth);
    expect(notJson.status).toBe(400);
    expect(notJson.body).toMatch(/JSON/);
    const unknown = await post(h.port, '/v1/jobs', JSON.stringify({ Job: { ID: 'web', TaskGroups: [] }, Sneaky: true }), auth);
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatch(/Sneaky/);
    const invalid = await post(
      h.port,
      '/v1/jobs',
      JSON.stringify({
        Job: { ID: 'web', TaskGroups: [{ Name: 'app', Tasks: [{ Name: 't', Driver: 'java', Config: { command: 'x' } }] }] },
      }),
      auth,
    );
    expect(invalid.status).toBe(400);
    expect(invalid.body).toMatch(/driver/);
    const huge = await post(h.port, '/v1/jobs', JSON.stringify({ Job: { pad: 'x'.repeat(2 * 1024 * 1024) } }), auth);
    expect(huge.status).toBe(400);
    expect(await h.api.listJobs()).toEqual([]);
  });
});

describe('csiplug job run watches what it started', () => {
  let h: AgentHarness;
  beforeAll(async () => {
    h = new AgentHarness();
    await h.start();
  });
  afterAll(async () => {
    await h.cleanup();
  });

  const job = (id: string, script: string) => `job "${id}" {
  group "app" {
    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", ${JSON.stringify(script)}]
      }
      restart {
        attempts = 0
        mode     = "fail"
      }
    }
  }
}
`;

  async function run(id: string, script: string, ...flags: string[]) {
    const file = path.join(h.root, `${id}.hcl`);
    fs.writeFileSync(file, job(id, script));
    return cli(['job', 'run', '-address', `http://127.0.0.1:${h.port}`, ...flags, file]);
  }

  it('exits 0 once its alloc runs and is healthy, having printed the task start', async () => {
    const r = await run('sleeper', 'exec sleep 600');
    expect(r.stdout).toMatch(/Monitoring deployment/);
    expect(r.stdout).toMatch(/Allocation "[0-9a-f]{8}" task "main": Started/);
    expect(r.stdout).toMatch(/Deployment "[0-9a-f]{8}" successful/);
    expect(r.code).toBe(0);
    expect((await h.api.getJob('sleeper')).allocs[0]!.clientStatus).toBe('running');
  });

  it('exits 2 when its alloc fails, with the reason from the task events', async () => {
    const r = await run('crasher', 'echo boom >&2; exit 3');
    expect(r.code).toBe(2);
    expect(r.stdout + r.stderr).toMatch(/Not Restarting/);
    expect(r.stdout + r.stderr).toMatch(/alloc status/);
  });

  it('-detach returns at once, before the alloc has run', async () => {
    const r = await run('detached', 'sleep 1; exec sleep 600', '-detach');
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(/Monitoring deployment/);
    expect(r.stdout).toMatch(/Allocation "[0-9a-f-]{36}" created/);
  });
});

describe('csiplug demo (npm start)', () => {
  it('runs the whole flow and leaves no mount behind', async () => {
    const before = mountsUnder(os.tmpdir()).filter((m) => m.includes('csiplug-demo-'));
    const r = await cli(['demo']);
    if (r.code !== 0) throw new Error(`demo failed:\n${r.stdout}\n${r.stderr}`);
    expect(r.stdout).toMatch(/✓ workload process kept running/);
    expect(r.stdout).toMatch(/✓ volume still mounted/);
    expect(r.stdout).toMatch(/✓ file intact/);
    expect(r.stdout).toMatch(/✓ plugin re-registered/);
    expect(r.stdout).toMatch(/✓ mounts left under the data dir: 0/);
    expect(r.stdout).not.toMatch(/✗/);
    expect(mountsUnder(os.tmpdir()).filter((m) => m.includes('csiplug-demo-'))).toEqual(before);
  });
});
