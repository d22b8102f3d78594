// End to end: an idle-connection flood against a real agent process that
// runs the real hostpath plugin and a workload with a bind-mounted volume.
//
// 1. With the connection caps lifted and the agent's open-file limit
//    lowered (ulimit -n), the flood exhausts its file descriptors: every
//    check of a task then fails with EMFILE. The workload must keep running,
//    its mount and claim must stay, the agent must serve again once the
//    connections close, and one SIGTERM must stop it.
// 2. With the default caps, the same flood is refused at the door and the
//    agent's health answers throughout.
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { AgentHarness, PLUGIN_JOB, isAlive, mountsUnder, pollUntil, volumeSpec, workloadJob } from './support/agent-process';

jest.setTimeout(240_000);

const FD_LIMIT = 256;

async function runPluginAndWorkload(h: AgentHarness): Promise<{ allocId: string; pid: number; hostPath: string }> {
  await h.api.runJob(jobToNomadJson(await parseJobspec(PLUGIN_JOB, 'plugin.hcl')));
  await pollUntil('plugin hostpath healthy', async () => {
    const p = await h.api.getPlugin('hostpath').catch(() => undefined);
    return p && p.nodesHealthy === 1 && p.controllersHealthy === 1 ? p : undefined;
  });
  await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('vol-0'), 'vol-0.hcl')));
  const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(workloadJob('work-0', 'vol-0'), 'work-0.hcl')));
  const allocId = allocIds[0]!;
  const alloc = await pollUntil('the workload running with its file written', async () => {
    const a = await h.api.getAlloc(allocId);
    if (a.clientStatus === 'failed') throw new Error(`the workload failed: ${JSON.stringify(a)}`);
    return a.clientStatus === 'running' && a.volumes.data && fs.existsSync(path.join(a.volumes.data.hostPath, 'owner.txt')) ? a : undefined;
  });
  return { allocId, pid: h.taskPid(allocId, 'writer'), hostPath: alloc.volumes.data!.hostPath };
}

/**
 * Opens `n` idle connections; resolves with the set of those still open,
 * which shrinks as the agent closes some (the kernel completes a handshake
 * before the agent accepts, so a refusal shows up a little later).
 */
async function flood(port: number, n: number): Promise<Set<net.Socket>> {
  const open = new Set<net.Socket>();
  await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<void>((resolve) => {
          const s = net.connect(port, '127.0.0.1');
          s.on('error', () => undefined);
          s.once('connect', () => {
            open.add(s);
            resolve();
          });
          s.once('close', () => {
            open.delete(s);
            resolve();
          });
        }),
    ),
  );
  return open;
}

/** A health check on a fresh connection, with a short deadline: the status, or 0 for no answer. */
function health(port: number): Promise<number> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let text = '';
    const done = () => {
      clearTimeout(timer);
      s.destroy();
      resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0));
    };
    const timer = setTimeout(done, 3_000);
    s.on('error', done);
    s.on('data', (d: Buffer) => {
      text += d.toString();
      if (text.includes('\r\n\r\n')) done();
    });
    s.on('close', done);
    s.write(`GET /v1/agent/health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
  });
}

describe('an idle-connection flood', () => {
  let h: AgentHarness;
  let sockets = new Set<net.Socket>();

  afterEach(async () => {
    for (const s of sockets) s.destroy();
    sockets.clear();
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual([]);
  });

  it(`that exhausts the agent's ${FD_LIMIT} file descriptors kills no task, keeps mount and claim, and one SIGTERM stops the agent`, async () => {
    h = new AgentHarness('limits {\n  http_max_conns = 100000\n  http_max_conns_per_client = 100000\n  http_idle_timeout = "10m"\n}\n', {
      fdLimit: FD_LIMIT,
    });
    await h.start();
    const { allocId, pid, hostPath } = await runPluginAndWorkload(h);

    sockets = await flood(h.port, FD_LIMIT * 2);
    // The agent is out of descriptors; its safety poll (5 s) and the plugin
    // probes run into EMFILE for a while.
    await pollUntil(
      'the agent to run into EMFILE',
      () => (/EMFILE|ENFILE|too many open files/i.test(h.log) ? true : undefined),
      60_000,
      200,
    );
    await new Promise((r) => setTimeout(r, 12_000));
    expect(isAlive(pid)).toBe(true);
    expect(mountsUnder(hostPath)).toEqual([hostPath]);

    for (const s of sockets) s.destroy();
    sockets.clear();
    const alloc = await pollUntil('the agent serving again', async () => h.api.getAlloc(allocId).catch(() => undefined), 60_000, 200);
    expect(alloc.clientStatus).toBe('running');
    expect(alloc.tasks.writer!.state).toBe('running');
    expect(alloc.tasks.writer!.restarts).toBe(0);
    expect(alloc.tasks.writer!.events.filter((e) => ['Terminated', 'Killed', 'Setup Failure', 'Not Restarting'].includes(e.type))).toEqual(
      [],
    );
    expect(alloc.volumes.data!.hostPath).toBe(hostPath);
    expect((await h.api.getVolume('vol-0')).claims.map((c) => c.allocId)).toEqual([allocId]);
    expect(isAlive(pid)).toBe(true);
    expect(mountsUnder(hostPath)).toEqual([hostPath]);

    // One SIGTERM is enough; the task and its mount outlive the agent.
    const proc = h.proc!;
    const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    proc.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(isAlive(pid)).toBe(true);
    expect(mountsUnder(hostPath)).toEqual([hostPath]);

    // The next agent re-attaches (and the cleanup stops everything through it).
    await h.start();
    const again = await pollUntil('the workload re-attached', async () => {
      const a = await h.api.getAlloc(allocId);
      return a.clientStatus === 'running' && a.tasks.writer?.state === 'running' ? a : undefined;
    });
    expect(again.tasks.writer!.restarts).toBe(0);
  });

  it('with the default caps is refused at the door while health answers and the workload runs on', async () => {
    h = new AgentHarness('', { fdLimit: 1024 });
    await h.start();
    const { allocId, pid, hostPath } = await runPluginAndWorkload(h);

    const agentFds = () => fs.readdirSync(`/proc/${h.proc!.pid}/fd`).length;
    const before = agentFds();
    sockets = await flood(h.port, 2_000);
    await new Promise((r) => setTimeout(r, 1_000));
    // What the door keeps: the per-address cap (100; the flood comes from one address) and the reserve (16).
    // Counted in the agent (the client's own count also holds handshakes the kernel never queued).
    const during = agentFds();
    expect(during - before).toBeLessThanOrEqual(100 + 16 + 4);
    expect(during - before).toBeGreaterThanOrEqual(50);
    // While the flood still holds the cap, a health check gets through (the kernel's accept queue
    // may drop a first handshake under the flood; a monitor retries as this does).
    await pollUntil(
      'a health check answered during the flood',
      async () => ((await health(h.port)) === 200 ? true : undefined),
      60_000,
      100,
    );
    expect(agentFds() - before).toBeGreaterThanOrEqual(50);
    expect(isAlive(pid)).toBe(true);

    for (const s of sockets) s.destroy();
    sockets.clear();
    const alloc = await pollUntil('the agent serving again', async () => h.api.getAlloc(allocId).catch(() => undefined), 60_000, 200);
    expect(alloc.clientStatus).toBe('running');
    expect(alloc.tasks.writer!.restarts).toBe(0);
    expect(mountsUnder(hostPath)).toEqual([hostPath]);
    expect(h.log).toMatch(/connection limit reached/);
  });
});
