// End to end, with real processes, sockets, SQLite and bind mounts: the
// agent survives kill -9 again and again without killing a task, restarting
// one, or losing a mount; a plugin restarting under running workloads is
// harmless; job stop unmounts and releases claims.
import * as fs from 'fs';
import * as path from 'path';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { chrootEnvConfigWith, hostpathPluginCodeDirs, hostpathPluginJobHcl, nodeBinary, workloadJobHcl } from '../src/commands/specs';
import {
  AgentHarness,
  PLUGIN_JOB,
  containersUnder,
  isAlive,
  mountsUnder,
  pollUntil,
  volumeSpec,
  workloadJob,
} from './support/agent-process';

jest.setTimeout(300_000);

const WORKLOADS = 20;
const RESTARTS = 10;

type Driver = 'raw_exec' | 'exec';

/** The plugin and the workloads as host processes, or all isolated on runc (the plugin's code dirs added to the chroot). */
const ISOLATED_PLUGIN_JOB = hostpathPluginJobHcl({ restartDelay: '100ms', driver: 'exec', node: nodeBinary() });
const isolatedAgentConfig = (): string => chrootEnvConfigWith(hostpathPluginCodeDirs());

async function runPlugin(h: AgentHarness, driver: Driver = 'raw_exec'): Promise<void> {
  await h.api.runJob(jobToNomadJson(await parseJobspec(driver === 'exec' ? ISOLATED_PLUGIN_JOB : PLUGIN_JOB, 'plugin.hcl')));
  await pollUntil('plugin hostpath healthy', async () => {
    const p = await h.api.getPlugin('hostpath').catch(() => undefined);
    return p && p.nodesHealthy === 1 && p.controllersHealthy === 1 ? p : undefined;
  });
}

async function runWorkload(h: AgentHarness, i: number, driver: Driver = 'raw_exec'): Promise<string> {
  const volumeId = `vol-${i}`;
  await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec(volumeId), `${volumeId}.hcl`)));
  const hcl =
    driver === 'exec'
      ? workloadJobHcl(`work-${i}`, volumeId, 'echo "$CSIPLUG_ALLOC_ID" > "$CSIPLUG_VOLUME_DATA/owner.txt" && exec sleep 3600', 'exec')
      : workloadJob(`work-${i}`, volumeId);
  const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(hcl, `work-${i}.hcl`)));
  return allocIds[0]!;
}

describe('agent restart survival (kill -9)', () => {
  let h: AgentHarness;

  beforeEach(() => {
    h = new AgentHarness();
  });

  afterEach(async () => {
    const { leftMounts, leftContainers } = await h.cleanup();
    expect(leftMounts).toEqual([]);
    expect(leftContainers).toEqual([]);
  });

  it.each<[Driver, string]>([
    ['raw_exec', 'host processes'],
    ['exec', 'all isolated on runc'],
  ])(
    `${RESTARTS} restarts with ${WORKLOADS} workload allocs on one plugin (%s: %s): 0 tasks killed, 0 restarts, every volume mounted, every file intact`,
    async (driver) => {
      if (driver === 'exec') h.extraConfig = isolatedAgentConfig();
      await h.start();
      await runPlugin(h, driver);
      const allocIds = await Promise.all(Array.from({ length: WORKLOADS }, (_, i) => runWorkload(h, i, driver)));
      const before = await pollUntil('every workload running with its file written', async () => {
        const allocs = await Promise.all(allocIds.map((id) => h.api.getAlloc(id)));
        if (allocs.some((a) => a.clientStatus === 'failed'))
          throw new Error(`a workload failed: ${JSON.stringify(allocs.find((a) => a.clientStatus === 'failed'))}`);
        const ready = allocs.every(
          (a) => a.clientStatus === 'running' && a.volumes.data && fs.existsSync(path.join(a.volumes.data.hostPath, 'owner.txt')),
        );
        return ready ? allocs : undefined;
      });
      const pids = new Map(allocIds.map((id) => [id, h.taskPid(id, 'writer')]));
      const paths = new Map(before.map((a) => [a.id, a.volumes.data!.hostPath]));
      const pluginAlloc = (await h.api.getPlugin('hostpath')).allocs[0]!;
      const pluginPid = h.taskPid(pluginAlloc, 'plugin');

      for (let round = 1; round <= RESTARTS; round++) {
        await h.kill('SIGKILL');
        // while no agent runs, nothing is lost
        for (const id of allocIds) expect(isAlive(pids.get(id)!)).toBe(true);
        await h.start();
        const allocs = await pollUntil(`round ${round}: plugin back and every alloc running`, async () => {
          const p = await h.api.getPlugin('hostpath').catch(() => undefined);
          if (!p || p.nodesHealthy !== 1) return undefined;
          const list = await Promise.all(allocIds.map((id) => h.api.getAlloc(id)));
          return list.every((a) => a.clientStatus === 'running' && a.tasks.writer?.state === 'running') ? list : undefined;
        });
        for (const a of allocs) {
          expect(a.tasks.writer!.restarts).toBe(0);
          expect(
            a.tasks.writer!.events.filter((e) => e.type === 'Killed' || e.type === 'Terminated' || e.type === 'Setup Failure'),
          ).toEqual([]);
          expect(isAlive(pids.get(a.id)!)).toBe(true);
          expect(h.taskPid(a.id, 'writer')).toBe(pids.get(a.id));
          expect(a.volumes.data!.hostPath).toBe(paths.get(a.id));
          expect(mountsUnder(paths.get(a.id)!)).toEqual([paths.get(a.id)]);
          expect(fs.readFileSync(path.join(paths.get(a.id)!, 'owner.txt'), 'utf8').trim()).toBe(a.id);
        }
        expect(h.taskPid(pluginAlloc, 'plugin')).toBe(pluginPid);
        // Isolated: each task's container is still the one it ran in.
        if (driver === 'exec') expect(containersUnder(h.root)).toHaveLength(WORKLOADS + 1);
      }

      // job stop unmounts and releases the claims
      await h.api.stopJob('work-0');
      expect(mountsUnder(paths.get(allocIds[0]!)!)).toEqual([]);
      expect((await h.api.getVolume('vol-0')).claims).toEqual([]);
      expect(isAlive(pids.get(allocIds[0]!)!)).toBe(false);
      if (driver === 'exec') expect(containersUnder(h.root)).toHaveLength(WORKLOADS);
    },
  );

  it('a plugin that restarts under running workloads: workloads keep running and unmount cleanly through the new plugin', async () => {
    await h.start();
    await runPlugin(h);
    const allocId = await runWorkload(h, 0);
    const alloc = await pollUntil('the workload running', async () => {
      const a = await h.api.getAlloc(allocId);
      return a.clientStatus === 'running' && a.volumes.data ? a : undefined;
    });
    const pid = h.taskPid(allocId, 'writer');
    const plugin = await h.api.getPlugin('hostpath');
    const pluginAlloc = plugin.allocs[0]!;
    const oldPluginPid = h.taskPid(pluginAlloc, 'plugin');
    process.kill(oldPluginPid, 'SIGKILL');
    await pollUntil('the plugin restarted and healthy again', async () => {
      const a = await h.api.getAlloc(pluginAlloc);
      const p = await h.api.getPlugin('hostpath');
      return a.tasks.plugin!.restarts >= 1 && p.nodesHealthy === 1 && h.taskPid(pluginAlloc, 'plugin') !== oldPluginPid ? true : undefined;
    });
    expect(isAlive(pid)).toBe(true);
    expect(mountsUnder(alloc.volumes.data!.hostPath)).toHaveLength(1);
    await h.api.stopJob('work-0');
    expect(mountsUnder(h.dataDir)).toEqual([]);
    expect((await h.api.getVolume('vol-0')).claims).toEqual([]);
  });
});
