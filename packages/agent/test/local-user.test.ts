// A local user who is not root gets nothing from an agent with the default
// config (no acl block): not a process as root (raw_exec or exec job), not a
// volume's secrets, not the state file. Real agent processes; the user is
// `nobody` (uid 65534), running curl and cat. Root, with the same calls, is
// served as before: a raw_exec job runs once the config enables raw_exec.
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { AgentHarness, isAlive, pollUntil } from './support/agent-process';

const NOBODY = 65534;

interface Answer {
  status: number;
  body: string;
  /** The X-Csiplug-Error-Code header of an error answer (empty on success). */
  code: string;
}

/** A command run as `uid`; resolves with its exit code and output. */
function runAs(uid: number, command: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { uid, gid: uid, cwd: '/', stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: '/usr/bin:/bin' } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** An API call with curl, as `uid`, over TCP to 127.0.0.1 like any local client. */
async function curlAs(uid: number, port: number, method: string, urlPath: string, body?: unknown): Promise<Answer> {
  // The status and the error code header on the last line, after the body.
  const args = ['-sS', '-X', method, '-o', '-', '-w', '\n%{http_code} %header{x-csiplug-error-code}', `http://127.0.0.1:${port}${urlPath}`];
  if (body !== undefined) args.push('-H', 'Content-Type: application/json', '--data-binary', JSON.stringify(body));
  const r = await runAs(uid, '/usr/bin/curl', args);
  if (r.code !== 0) throw new Error(`curl as uid ${uid} failed (${r.code}): ${r.stderr}`);
  const cut = r.stdout.lastIndexOf('\n');
  const [status = '', code = ''] = r.stdout.slice(cut + 1).split(' ');
  return { status: Number(status), body: r.stdout.slice(0, cut), code };
}

/** A job whose task records who it runs as and copies the state file out: what a local user would do with root. */
function stealJob(id: string, driver: 'raw_exec' | 'exec', dataDir: string, proofDir: string): unknown {
  const script = `id -u > ${proofDir}/${id}.uid; cp ${dataDir}/state.db ${proofDir}/${id}.db; exec sleep 600`;
  // Nomad's JSON job format, as Nomad's own clients send it.
  return {
    Job: {
      ID: id,
      TaskGroups: [{ Name: 'g', Tasks: [{ Name: 't', Driver: driver, Config: { command: '/bin/sh', args: ['-c', script] } }] }],
    },
  };
}

const SECRET = 'hunter2-local-user-test';
/** A register body as Nomad's CSIVolumeRegisterRequest. */
const volume = (id: string) => ({
  Volumes: [
    {
      ID: id,
      Name: id,
      PluginID: 'hostpath',
      ExternalID: `ext-${id}`,
      Secrets: { password: SECRET },
      RequestedCapabilities: [{ AccessMode: 'single-node-writer', AttachmentMode: 'file-system' }],
    },
  ],
});

describe('a local user who is not root, against the default config (no acl, raw_exec not enabled)', () => {
  let h: AgentHarness;
  let proofDir: string;

  beforeAll(async () => {
    h = new AgentHarness('', { rawExec: false });
    await h.start();
    // Where a job would leave its proof: anyone may write here, so the test sees any task that ran, whoever it ran as.
    proofDir = path.join(h.root, 'proof');
    fs.mkdirSync(proofDir, { mode: 0o1777 });
    fs.chmodSync(proofDir, 0o1777);
    fs.chmodSync(h.root, 0o755);
    // Root registers a volume with a secret, the kind of thing the state file holds in clear.
    const reg = await curlAs(0, h.port, 'PUT', '/v1/volume/csi/vol-secret', volume('vol-secret'));
    expect(reg.status).toBe(200);
  });

  afterAll(async () => {
    await h.cleanup();
  });

  it('cannot start a process through a raw_exec job: 403, nothing stored, nothing run', async () => {
    const r = await curlAs(NOBODY, h.port, 'POST', '/v1/jobs', stealJob('steal-raw', 'raw_exec', h.dataDir, proofDir));
    expect(r.status).toBe(403);
    expect(r.code).toBe('EFORBIDDEN');
    expect(r.body).toContain('this connection comes from uid 65534, not root');
    expect(r.body).toContain('acl { token');
    expect(await h.api.listJobs()).toEqual([]);
    expect(fs.readdirSync(proofDir)).toEqual([]);
  });

  it('cannot start one through an exec job either', async () => {
    const r = await curlAs(NOBODY, h.port, 'POST', '/v1/jobs', stealJob('steal-exec', 'exec', h.dataDir, proofDir));
    expect(r.status).toBe(403);
    expect(await h.api.listJobs()).toEqual([]);
  });

  it('is not taken for root by closing its socket right after the request', async () => {
    // Connect, send the request, close at once (not waiting for the answer), 20 times. A closed socket whose FIN the
    // agent's kernel acknowledged is listed in /proc/net/tcp as FIN_WAIT2 with uid 0 and inode 0 (older kernels show
    // any orphaned socket as uid 0): it belongs to no process, and must not be taken for root's.
    const body = JSON.stringify(stealJob('steal-closed', 'exec', h.dataDir, proofDir));
    const request = `POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:${h.port}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const script = `
      const net = require('net');
      const [port, request] = process.argv.slice(1);
      (async () => {
        for (let i = 0; i < 20; i++) {
          await new Promise((resolve) => {
            const s = net.connect(Number(port), '127.0.0.1', () => s.write(request, () => { s.destroy(); resolve(); }));
            s.on('error', resolve);
          });
        }
      })();`;
    const r = await runAs(NOBODY, process.execPath, ['-e', script, String(h.port), request]);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    // Root's own call comes after the agent has read those requests.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await h.api.listJobs()).toEqual([]);
  });

  it('cannot read a volume, the volume list, or any other path of the API', async () => {
    for (const p of ['/v1/volume/csi/vol-secret', '/v1/volumes', '/v1/jobs', '/v1/agent/health', '/v1/node/self']) {
      const r = await curlAs(NOBODY, h.port, 'GET', p);
      expect({ p, status: r.status }).toEqual({ p, status: 403 });
      expect(r.body).not.toContain('ext-vol-secret');
    }
  });

  it('cannot read the state file or list the data dir: root owns them, 0600 and 0700', async () => {
    const dir = fs.statSync(h.dataDir);
    expect({ uid: dir.uid, mode: (dir.mode & 0o777).toString(8) }).toEqual({ uid: 0, mode: '700' });
    const db = fs.statSync(path.join(h.dataDir, 'state.db'));
    expect({ uid: db.uid, mode: (db.mode & 0o777).toString(8) }).toEqual({ uid: 0, mode: '600' });
    const cat = await runAs(NOBODY, '/bin/cat', [path.join(h.dataDir, 'state.db')]);
    expect(cat.code).not.toBe(0);
    expect(cat.stderr).toContain('Permission denied');
    expect(cat.stdout).not.toContain(SECRET);
    const ls = await runAs(NOBODY, '/bin/ls', [h.dataDir]);
    expect(ls.code).not.toBe(0);
  });

  it('root is served: the volume (secrets redacted), and a raw_exec job refused with how to enable the driver', async () => {
    const vol = await curlAs(0, h.port, 'GET', '/v1/volume/csi/vol-secret');
    expect(vol.status).toBe(200);
    expect(vol.body).toContain('"Secrets":null');
    expect(vol.body).not.toContain(SECRET);
    const raw = await curlAs(0, h.port, 'POST', '/v1/jobs', stealJob('root-raw', 'raw_exec', h.dataDir, proofDir));
    expect(raw.status).toBe(400);
    expect(raw.body).toBe(
      'job "root-raw" group "g" task "t": driver = "raw_exec" runs the task as a host process with this agent\'s user (root) and is disabled on this agent: ' +
        'enable it in the agent config with plugin "raw_exec" { config { enabled = true } } and restart the agent, or use driver = "exec" (a task isolated on runc)',
    );
    expect(await h.api.listJobs()).toEqual([]);
    const node = JSON.parse((await curlAs(0, h.port, 'GET', '/v1/node/self')).body);
    expect(node.Drivers.raw_exec).toMatchObject({ Detected: false, Healthy: false });
  });
});

describe('root, against an agent whose config enables raw_exec', () => {
  let h: AgentHarness;

  beforeAll(async () => {
    h = new AgentHarness();
    await h.start();
  });

  afterAll(async () => {
    await h.cleanup();
  });

  it('runs a raw_exec job (as root) while nobody is still refused', async () => {
    const proofDir = path.join(h.root, 'proof');
    fs.mkdirSync(proofDir, { mode: 0o1777 });
    fs.chmodSync(proofDir, 0o1777);
    fs.chmodSync(h.root, 0o755);
    const refused = await curlAs(NOBODY, h.port, 'POST', '/v1/jobs', stealJob('steal', 'raw_exec', h.dataDir, proofDir));
    expect(refused.status).toBe(403);
    const r = await curlAs(0, h.port, 'POST', '/v1/jobs', stealJob('root-job', 'raw_exec', h.dataDir, proofDir));
    expect(r.status).toBe(200);
    const uid = await pollUntil(
      'the raw_exec task to write its uid',
      async () => {
        const text = fs.existsSync(path.join(proofDir, 'root-job.uid')) ? fs.readFileSync(path.join(proofDir, 'root-job.uid'), 'utf8') : '';
        return text.endsWith('\n') ? text.trim() : undefined;
      },
      30_000,
    );
    expect(uid).toBe('0');
    expect(fs.existsSync(path.join(proofDir, 'steal.uid'))).toBe(false);
    const node = JSON.parse((await curlAs(0, h.port, 'GET', '/v1/node/self')).body);
    expect(node.Drivers.raw_exec).toMatchObject({ Detected: true, Healthy: true });
  });
});

describe('raw_exec turned off while a raw_exec task runs', () => {
  let h: AgentHarness;

  beforeAll(() => {
    h = new AgentHarness();
  });

  afterAll(async () => {
    await h.cleanup();
  });

  it('the task re-attached runs on with a Config Refused event, and is refused when it next starts', async () => {
    await h.start();
    const S = 1_000_000_000;
    const job = {
      ID: 'sleeper',
      TaskGroups: [
        {
          Name: 'g',
          RestartPolicy: { Attempts: 1, Delay: 1 * S, Interval: 3600 * S, Mode: 'fail' },
          Tasks: [{ Name: 't', Driver: 'raw_exec', Config: { command: '/bin/sleep', args: ['600'] } }],
        },
      ],
    };
    const { allocIds } = await h.api.runJob(job as never);
    const allocId = allocIds[0]!;
    await pollUntil(
      'the task running',
      async () => ((await h.api.getAlloc(allocId)).clientStatus === 'running' ? true : undefined),
      30_000,
    );
    const pid = h.taskPid(allocId, 't');
    await h.kill('SIGTERM');
    h.rawExec = false;
    await h.start();
    const back = await pollUntil(
      'the Config Refused event',
      async () => {
        const a = await h.api.getAlloc(allocId);
        return a.tasks.t?.events.some((e) => e.type === 'Config Refused') ? a : undefined;
      },
      30_000,
    );
    expect(back.clientStatus).toBe('running');
    expect(isAlive(pid)).toBe(true);
    expect(back.tasks.t!.events.find((e) => e.type === 'Config Refused')!.message).toContain(
      'will not start it again: driver = "raw_exec" runs the task as a host process',
    );
    // Its process ends: the restart is refused, with the reason, and nothing runs.
    process.kill(pid, 'SIGKILL');
    const failed = await pollUntil(
      'the restart refused',
      async () => {
        const a = await h.api.getAlloc(allocId);
        return a.clientStatus === 'failed' ? a : undefined;
      },
      30_000,
    );
    const setup = failed.tasks.t!.events.find((e) => e.type === 'Setup Failure');
    expect(setup?.message).toContain('plugin "raw_exec" { config { enabled = true } }');
    expect(failed.tasks.t!.events.filter((e) => e.type === 'Started')).toHaveLength(1);
  });
});
