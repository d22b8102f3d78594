// Hostile input against a real agent (in-process, memory state) and its
// real HTTP API: what used to hang, 500 or pile up is answered at once with
// a status that says whose fault it is, and nothing is left behind.
import { MemoryLogger } from '@csiplug/core';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Agent } from '../src/agent';
import { HttpApi } from '@csiplug/api';
import { devConfig } from '@csiplug/jobspec';
import { raw } from '@csiplug/api/testing';

function sleeper(id: string, count: number): string {
  return JSON.stringify({
    Job: {
      ID: id,
      TaskGroups: [
        { Name: 'app', Count: count, Tasks: [{ Name: 'main', Driver: 'raw_exec', Config: { command: '/bin/sleep', args: ['300'] } }] },
      ],
    },
  });
}

async function until<T>(what: string, fn: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < 400; i++) {
    const v = await fn();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`gave up waiting for ${what}`);
}

describe('hostile input against a real agent', () => {
  let dataDir: string;
  let agent: Agent;
  let api: HttpApi;
  let url: string;

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-hostile-'));
    const base = devConfig();
    // A plugin wait of ten minutes: a create that waited for an unknown plugin would time the test out.
    agent = await Agent.start(
      {
        ...base,
        dataDir,
        port: 0,
        limits: { ...base.limits, maxAllocsPerJob: 3 },
        timeouts: { ...base.timeouts, pluginWaitPrerun: 600_000 },
      },
      // Tasks run under @csiplug/driver's built executor, the driver's default even with the agent run from its sources.
      { logger: new MemoryLogger() },
    );
    api = new HttpApi(agent, { bindAddr: '127.0.0.1', port: 0, logger: new MemoryLogger() });
    await api.listen();
    url = api.url!;
  });

  afterAll(async () => {
    await api.dispose();
    await agent.dispose({ stopTasks: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers a create naming an unknown plugin at once with 404, naming it', async () => {
    // Nomad's CSIVolumeCreateRequest.
    const volume = {
      ID: 'v1',
      PluginID: 'no-such-plugin',
      RequestedCapabilities: [{ AccessMode: 'single-node-writer', AttachmentMode: 'file-system' }],
    };
    const r = await raw(url, 'PUT', '/v1/volume/csi/v1/create', { body: JSON.stringify({ Volumes: [volume] }) });
    expect(r.status).toBe(404);
    expect(r.error).toMatch(/no controller of plugin "no-such-plugin" is registered on this node and no job here runs one/);
    expect((await raw(url, 'GET', '/v1/volume/csi/v1')).status).toBe(404);
  });

  it('refuses a job that asks for more allocs than the limit, and runs none of them', async () => {
    const r = await raw(url, 'POST', '/v1/jobs', { body: sleeper('many', 5) });
    expect(r.status).toBe(400);
    expect(r.error).toMatch(
      /job "many" asks for 5 allocs \(app: 5\); this agent runs at most 3 per job \(limits \{ max_allocs_per_job \}\)/,
    );
    expect(agent.listAllocs()).toHaveLength(0);
  });

  it('purge removes the alloc dirs it leaves behind', async () => {
    const r = await raw(url, 'POST', '/v1/jobs', { body: sleeper('short', 2) });
    expect(r.status).toBe(200);
    // Nomad's JobRegisterResponse; the allocs this run placed are csiplug's own, in its Csiplug field.
    const ids: unknown = (r.json?.Csiplug as { allocIds?: unknown } | undefined)?.allocIds;
    if (!Array.isArray(ids)) throw new Error(`POST /v1/jobs answered without Csiplug.allocIds: ${r.text}`);
    await until(`both allocs running (${JSON.stringify(agent.listAllocs().map((a) => [a.clientStatus, a.tasks]))})`, async () =>
      agent.listAllocs().filter((a) => a.clientStatus === 'running').length === 2 ? true : undefined,
    );
    const dirs = ids.map((id) => path.join(dataDir, 'allocs', String(id)));
    for (const d of dirs) expect(fs.existsSync(d)).toBe(true);
    expect((await raw(url, 'DELETE', '/v1/job/short?purge=true')).status).toBe(200);
    for (const d of dirs) expect(fs.existsSync(d)).toBe(false);
    expect((await raw(url, 'GET', '/v1/job/short')).status).toBe(404);
  });
});
