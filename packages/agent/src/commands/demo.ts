// `csiplug demo` (what `npm start` runs): an agent with the reference
// hostpath plugin and a workload, killed with SIGKILL and started again, to
// show that nothing is lost: the workload keeps running, its volume stays
// mounted, its file is intact and the plugin re-registers. Then everything
// is stopped and every mount removed. Each step says what it does and how
// long it took.
import { errorMessage } from '@csiplug/core';
import { executorPaths, findRunc, type ExecutorPidRecord } from '@csiplug/driver';
import { type ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ApiClient } from '@csiplug/api';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import type { CommandIO } from './agent-command';
import { freePort, isAlive, mountsUnder, pollUntil } from './host';
import {
  chrootEnvConfigWith,
  hostpathPluginCodeDirs,
  hostpathPluginDir,
  hostpathPluginJobHcl,
  nodeBinary,
  volumeHcl,
  workloadJobHcl,
} from './specs';

export interface DemoOptions {
  /** Keep the data dir afterwards (for a look around). */
  keep?: boolean;
  /** The `csiplug` bin script to run agents with (default: this package's). */
  bin?: string;
  /** Upper bound for each wait, ms. */
  stepTimeout?: number;
}

export async function runDemo(options: DemoOptions, io: CommandIO): Promise<number> {
  const say = (line: string) => io.stdout.write(`${line}\n`);
  const stepTimeout = options.stepTimeout ?? 60_000;
  const bin = options.bin ?? path.join(__dirname, '..', 'bin.js');
  if (process.getuid?.() !== 0) {
    io.stderr.write('Error: the demo bind-mounts volumes through the hostpath plugin and needs root\n');
    return 1;
  }
  try {
    // An optional dependency of the agent: said before anything starts, not as a plugin that never comes up.
    hostpathPluginDir();
  } catch (err) {
    io.stderr.write(`Error: ${errorMessage(err)}\n`);
    return 1;
  }
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-demo-'));
  const port = await freePort();
  const configFile = path.join(dataDir, 'agent.hcl');
  // Isolated on runc where it is installed (the plugin sees its own code besides the default chroot: chroot_env is host path = path
  // in the task, as in Nomad, and each code dir is shown at its own path; a chroot_env map replaces the defaults, as in Nomad, so
  // the map written holds them too), host processes otherwise.
  const driver = findRunc() ? 'exec' : 'raw_exec';
  const codeDirs = driver === 'exec' ? hostpathPluginCodeDirs() : [];
  // raw_exec is off unless the config enables it (as in Nomad): the demo enables it only when it needs it; its API serves only root anyway.
  const plugins =
    driver === 'exec'
      ? codeDirs.length
        ? chrootEnvConfigWith(codeDirs)
        : ''
      : 'plugin "raw_exec" {\n  config {\n    enabled = true\n  }\n}\n';
  fs.writeFileSync(configFile, `data_dir = "${dataDir}/data"\nport = ${port}\nlog_level = "warn"\n${plugins}`);
  const api = new ApiClient({ address: `http://127.0.0.1:${port}` });
  let agent: ChildProcess | undefined;
  let step = 0;
  const started = Date.now();

  const run = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    step++;
    const t0 = Date.now();
    io.stdout.write(`[${step}] ${what} … `);
    try {
      const result = await fn();
      say(`done (${Date.now() - t0} ms)`);
      return result;
    } catch (err) {
      say(`FAILED (${Date.now() - t0} ms)`);
      throw err;
    }
  };

  const until = <T>(what: string, fn: () => Promise<T | undefined>): Promise<T> => pollUntil(what, fn, stepTimeout, 100);

  const startAgent = async () => {
    const log = fs.openSync(path.join(dataDir, 'agent.log'), 'a');
    agent = spawn(process.execPath, [bin, 'agent', '-config', configFile], { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    const child = agent;
    await until('the agent API', async () => {
      if (child.exitCode !== null) throw new Error(`the agent exited with code ${child.exitCode}; see ${dataDir}/agent.log`);
      return (await api.health()).ok ? true : undefined;
    });
  };

  const stopAgent = async (signal: NodeJS.Signals) => {
    const child = agent;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill(signal);
    await exited;
  };

  const show = async (title: string, text: string) => {
    say(`    ── ${title}`);
    for (const line of text.trimEnd().split('\n')) say(`    ${line}`);
  };

  let code = 0;
  try {
    say(`csiplug demo — data dir ${dataDir}, API http://127.0.0.1:${port}`);
    say(
      driver === 'exec'
        ? '    tasks run isolated on runc (driver "exec")'
        : '    tasks run as host processes (driver "raw_exec"): runc is not installed (apt-get install runc for isolated tasks)',
    );
    await run('start the agent', startAgent);
    const pluginJob = await parseJobspec(
      hostpathPluginJobHcl({ driver, ...(driver === 'exec' ? { node: nodeBinary() } : {}) }),
      'hostpath-plugin.hcl',
    );
    await run('run the hostpath plugin as a monolith plugin job', () => api.runJob(jobToNomadJson(pluginJob)));
    const plugin = await run('wait for the plugin: socket, probe, registration, fingerprint', () =>
      until('plugin hostpath to be healthy', async () => {
        const p = await api.getPlugin('hostpath').catch(() => undefined);
        return p && p.nodesHealthy === 1 && p.controllersHealthy === 1 ? p : undefined;
      }),
    );
    await show(
      'plugin status',
      `hostpath  provider ${plugin.provider}  controllers ${plugin.controllersHealthy}/${plugin.controllersExpected}  nodes ${plugin.nodesHealthy}/${plugin.nodesExpected}`,
    );
    const volume = await run('create volume vol-demo through CreateVolume', async () =>
      api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeHcl('vol-demo'), 'volume.hcl'))),
    );
    await show(
      'volume status',
      `${volume.id}  plugin ${volume.pluginId}  external id ${volume.externalId}  schedulable ${volume.schedulable}`,
    );
    const workloadJob = await parseJobspec(
      workloadJobHcl(
        'workload',
        'vol-demo',
        'echo "written by $CSIPLUG_ALLOC_ID" > "$CSIPLUG_VOLUME_DATA/hello.txt" && exec sleep 3600',
        driver,
      ),
      'workload.hcl',
    );
    const { allocIds } = await run('run a workload that writes into the volume', () => api.runJob(jobToNomadJson(workloadJob)));
    const allocId = allocIds[0]!;
    const before = await run('wait for the workload: claim, stage, publish, start', () =>
      until('the workload to run', async () => {
        const a = await api.getAlloc(allocId);
        if (a.clientStatus === 'failed') throw new Error(`the workload failed: ${JSON.stringify(a.tasks.writer?.events.at(-1))}`);
        const vol = a.volumes.data;
        return a.clientStatus === 'running' && vol && fs.existsSync(path.join(vol.hostPath, 'hello.txt')) ? a : undefined;
      }),
    );
    const hostPath = before.volumes.data!.hostPath;
    const content = fs.readFileSync(path.join(hostPath, 'hello.txt'), 'utf8');
    const taskPid = await run('find the workload process', async () => {
      const record = JSON.parse(
        fs.readFileSync(executorPaths(path.join(dataDir, 'data', 'allocs', allocId, 'writer')).pid, 'utf8'),
      ) as ExecutorPidRecord;
      return record.pid;
    });
    await show(
      'alloc status',
      `${before.name}  ${before.clientStatus}  task writer pid ${taskPid}  volume data at ${hostPath}\n    hello.txt: ${content.trim()}`,
    );

    await run('kill the agent with SIGKILL', () => stopAgent('SIGKILL'));
    say(`    workload pid ${taskPid} alive: ${isAlive(taskPid)}; volume mounted: ${mountsUnder(hostPath).length > 0}`);
    await run('start the agent again on the same data dir', startAgent);
    const after = await run('wait for the restore: plugin re-registered, workload re-attached', () =>
      until('the restore', async () => {
        const p = await api.getPlugin('hostpath').catch(() => undefined);
        const a = await api.getAlloc(allocId);
        return p && p.nodesHealthy === 1 && a.clientStatus === 'running' && a.volumes.data ? { p, a } : undefined;
      }),
    );
    const checks: [string, boolean][] = [
      ['workload process kept running (same pid)', isAlive(taskPid)],
      ['no task restarts', after.a.tasks.writer?.restarts === 0],
      ['volume still mounted at the same path', after.a.volumes.data!.hostPath === hostPath && mountsUnder(hostPath).length > 0],
      ['file intact', fs.readFileSync(path.join(hostPath, 'hello.txt'), 'utf8') === content],
      ['plugin re-registered and healthy', after.p.nodesHealthy === 1 && after.p.controllersHealthy === 1],
    ];
    for (const [what, ok] of checks) say(`    ${ok ? '✓' : '✗'} ${what}`);
    if (checks.some(([, ok]) => !ok)) code = 1;

    await run('stop the workload: unpublish, unstage, release the claim', () => api.stopJob('workload'));
    await run('delete the volume through DeleteVolume', () => api.deleteVolume('vol-demo'));
    await run('stop the plugin job', () => api.stopJob('hostpath-plugin'));
    await run('stop the agent with SIGTERM', () => stopAgent('SIGTERM'));
    const left = mountsUnder(dataDir);
    say(`    ${left.length === 0 ? '✓' : '✗'} mounts left under the data dir: ${left.length}`);
    if (left.length) code = 1;
    say(`${code === 0 ? 'demo finished' : 'demo finished with failed checks'} in ${Date.now() - started} ms`);
  } catch (err) {
    io.stderr.write(`Error: ${errorMessage(err)}\n    agent log: ${path.join(dataDir, 'agent.log')}\n`);
    code = 1;
  } finally {
    await stopAgent('SIGTERM').catch(() => undefined);
    // Last resort for a failed run: no mount and no process may outlive the demo.
    for (const m of mountsUnder(dataDir).reverse()) spawn('umount', ['-l', m]);
    if (!options.keep && code === 0) fs.rmSync(dataDir, { recursive: true, force: true });
  }
  return code;
}
