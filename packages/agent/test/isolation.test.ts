// Isolated workloads end to end, on the real runc: a `driver = "exec"` task
// sees its volume at its destination (a bind mount into its own root; a
// read-only volume_mount refuses writes with EROFS), its own dirs at
// /local, /alloc and /secrets, and nothing of the host it was not given;
// it survives kill -9 of the agent (same runc process, re-attached, the
// container still there) and a job stop leaves no container and no mount.
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { containerId } from '@csiplug/driver';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { chrootEnvConfigWith, hostpathPluginCodeDirs, hostpathPluginJobHcl, nodeBinary } from '../src/commands/specs';
import { AgentHarness, PLUGIN_JOB, containersUnder, isAlive, mountsUnder, pollUntil, volumeSpec } from './support/agent-process';

jest.setTimeout(120_000);

const isolatedJob = (volumeId: string) => `
job "iso" {
  group "app" {
    volume "data" {
      type            = "csi"
      source          = "${volumeId}"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }
    task "writer" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \${CSIPLUG_ALLOC_ID} > $CSIPLUG_VOLUME_DATA/owner.txt; { echo x > /ro/nope; } 2> /local/ro-err; ls / > /local/root; cat /proc/1/cmdline > /local/pid; readlink /proc/self/ns/net > /local/netns; echo $CSIPLUG_TASK_DIR > /local/taskdir; exec sleep 3600"]
      }
      volume_mount {
        volume      = "data"
        destination = "/data"
      }
      volume_mount {
        volume      = "data"
        destination = "/ro"
        read_only   = true
      }
    }
  }
}`;

describe('isolated (exec) workloads on runc', () => {
  let h: AgentHarness;

  beforeEach(() => {
    h = new AgentHarness();
  });
  afterEach(async () => {
    const { leftMounts, leftContainers } = await h.cleanup();
    expect(leftMounts).toEqual([]);
    expect(leftContainers).toEqual([]);
  });

  it('writes through its volume destination, cannot write a read-only mount, keeps running across kill -9, and a stop leaves no container', async () => {
    await h.start();
    await h.api.runJob(jobToNomadJson(await parseJobspec(PLUGIN_JOB, 'plugin.hcl')));
    await pollUntil('plugin hostpath healthy', async () => {
      const p = await h.api.getPlugin('hostpath').catch(() => undefined);
      return p && p.nodesHealthy === 1 ? p : undefined;
    });
    await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('vol-iso'), 'v.hcl')));
    const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(isolatedJob('vol-iso'), 'iso.hcl')));
    const id = allocIds[0]!;
    const local = path.join(h.dataDir, 'allocs', id, 'writer', 'local');
    const alloc = await pollUntil('the isolated workload running with its files written', async () => {
      const a = await h.api.getAlloc(id);
      if (a.clientStatus === 'failed') throw new Error(`the workload failed: ${JSON.stringify(a.tasks)}`);
      return a.clientStatus === 'running' && a.volumes.data && fs.existsSync(path.join(local, 'taskdir')) ? a : undefined;
    });
    const hostPath = alloc.volumes.data!.hostPath;
    // The file written at /data lands in the volume, on the host.
    expect(fs.readFileSync(path.join(hostPath, 'owner.txt'), 'utf8').trim()).toBe(id);
    expect(fs.readFileSync(path.join(local, 'ro-err'), 'utf8')).toMatch(/Read-only file system/);
    expect(fs.existsSync(path.join(hostPath, 'nope'))).toBe(false);
    // Its own pid namespace (pid 1 is the init that passes signals on to it), its own dirs, and no more of the host than it was given.
    expect(fs.readFileSync(path.join(local, 'pid'), 'utf8').split('\0')).toEqual(expect.arrayContaining(['/bin/sh', '-c', 'csiplug-init']));
    expect(fs.readFileSync(path.join(local, 'taskdir'), 'utf8').trim()).toBe('/local');
    const root = fs.readFileSync(path.join(local, 'root'), 'utf8').split('\n').filter(Boolean);
    for (const d of ['alloc', 'data', 'local', 'ro', 'secrets', 'tmp', 'usr']) expect(root).toContain(d);
    for (const d of ['root', 'home', 'work', 'var']) expect(root).not.toContain(d);
    expect(alloc.tasks.writer!.events.map((e) => e.message)).toContainEqual(
      expect.stringMatching(/^task started isolated by the exec driver \(runc, pid \d+; own network \(loopback only\)\)$/),
    );
    // An API with no token: the task gets a network of its own, so it cannot reach the API on 127.0.0.1.
    expect(fs.readFileSync(path.join(local, 'netns'), 'utf8').trim()).not.toBe(fs.readlinkSync('/proc/self/ns/net'));
    const container = containerId(id, 'writer');
    expect(containersUnder(h.root)).toEqual([container]);

    // kill -9 of the agent: the task runs on, and a new agent re-attaches to it.
    const pid = h.taskPid(id, 'writer');
    await h.kill('SIGKILL');
    expect(isAlive(pid)).toBe(true);
    await h.start();
    const back = await pollUntil('the workload re-attached', async () => {
      const a = await h.api.getAlloc(id);
      return a.tasks.writer?.events.some((e) => e.type === 'Reattached') && a.clientStatus === 'running' ? a : undefined;
    });
    expect(back.tasks.writer!.restarts).toBe(0);
    expect(h.taskPid(id, 'writer')).toBe(pid);
    expect(containersUnder(h.root)).toEqual([container]);
    expect(mountsUnder(hostPath)).toEqual([hostPath]);

    // A stop ends the container, then unmounts.
    await h.api.stopJob('iso');
    await pollUntil('the workload stopped', async () => ((await h.api.getAlloc(id)).clientStatus === 'complete' ? true : undefined));
    expect(isAlive(pid)).toBe(false);
    expect(containersUnder(h.root)).toEqual([]);
    expect(cgroupsOf(container)).toEqual([]);
  });

  it("a network of its own by default; the host's network only when asked and the API asks for a token; a task on it runs on, with an event, when the token goes", async () => {
    const netJob = (jobId: string, mode: string) => `
job "${jobId}" {
  group "app" {
    task "probe" {
      driver = "exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "readlink /proc/self/ns/net > /local/netns; exec sleep 3600"]
        ${mode ? `network_mode = "${mode}"` : ''}
      }
    }
  }
}`;
    /** Runs the probe job; its alloc once it runs (with the network namespace it is in) or has failed. */
    const probe = async (jobId: string, mode: string) => {
      const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(netJob(jobId, mode), `${jobId}.hcl`)));
      const file = path.join(h.dataDir, 'allocs', allocIds[0]!, 'probe', 'local', 'netns');
      const alloc = await pollUntil(`${jobId} settled`, async () => {
        const a = await h.api.getAlloc(allocIds[0]!);
        return a.clientStatus === 'failed' || (a.clientStatus === 'running' && fs.existsSync(file) && fs.readFileSync(file, 'utf8'))
          ? a
          : undefined;
      });
      return { alloc, netns: alloc.clientStatus === 'running' ? fs.readFileSync(file, 'utf8').trim() : undefined };
    };
    const running = (r: { alloc: { clientStatus: string }; netns?: string }) => {
      expect(r.alloc.clientStatus).toBe('running');
      expect(r.netns).toMatch(/^net:\[\d+\]$/);
      return r.netns!;
    };
    const host = fs.readlinkSync('/proc/self/ns/net');

    // No token: a network of its own; "host" is refused with the reason, at once (no restarts, no driver failure).
    await h.start();
    expect(running(await probe('plain', ''))).not.toBe(host);
    const refused = await probe('asks-host', 'host');
    expect(refused.alloc.clientStatus).toBe('failed');
    const events = refused.alloc.tasks.probe!.events;
    expect(events.map((e) => e.message)).toContainEqual(
      expect.stringContaining('network_mode = "host" would let the task reach this agent\'s API, which asks for no token'),
    );
    expect(events.filter((e) => e.type === 'Driver Failure')).toEqual([]);
    expect(refused.alloc.tasks.probe!.restarts).toBe(0);
    await h.api.stopJob('plain');
    await h.kill('SIGTERM');

    // With a token: still a network of its own by default; "host" gives the host's.
    h.extraConfig = 'acl {\n  token = "net-test-token"\n}';
    await h.start('net-test-token');
    expect(running(await probe('plain-2', ''))).not.toBe(host);
    const shared = await probe('on-host', 'host');
    expect(running(shared)).toBe(host);
    expect(shared.alloc.tasks.probe!.events.map((e) => e.message)).toContainEqual(expect.stringMatching(/; the host's network\)$/));
    const pid = h.taskPid(shared.alloc.id, 'probe');

    // The token goes by a reload (SIGHUP): the task on the host's network runs on, says so (event and warning), and is refused at its next start.
    fs.writeFileSync(h.configFile, fs.readFileSync(h.configFile, 'utf8').replace(/acl \{[^}]*\}/, ''));
    const from = h.log.length;
    process.kill(h.proc!.pid!, 'SIGHUP');
    const refusedEvent = await pollUntil('the Config Refused event after the reload', async () => {
      const a = await h.api.getAlloc(shared.alloc.id);
      return a.tasks.probe?.events.find((e) => e.type === 'Config Refused');
    });
    expect(refusedEvent.message).toMatch(/will not start it again: network_mode = "host"/);
    expect(h.log.slice(from)).toMatch(new RegExp(`"alloc_id":"${shared.alloc.id}".*will not start it again`));
    // The task on its own network is not named.
    const plain = (await h.api.getJob('plain-2')).allocs[0]!;
    expect((await h.api.getAlloc(plain.id)).tasks.probe!.events.some((e) => e.type === 'Config Refused')).toBe(false);
    expect(isAlive(pid)).toBe(true);

    // The token goes (agent killed, restarted without it): the task on the host's network runs on, never stopped for it, and says so.
    await h.kill('SIGKILL');
    h.extraConfig = '';
    await h.start();
    const back = await pollUntil('the host-network task re-attached', async () => {
      const a = await h.api.getAlloc(shared.alloc.id);
      // One from the reload, one from the restore: the restore says it again.
      return (a.tasks.probe?.events.filter((e) => e.type === 'Config Refused').length ?? 0) >= 2 ? a : undefined;
    });
    expect(back.clientStatus).toBe('running');
    expect(h.taskPid(shared.alloc.id, 'probe')).toBe(pid);
    expect(isAlive(pid)).toBe(true);
    expect(back.tasks.probe!.events.find((e) => e.type === 'Config Refused')!.message).toMatch(
      /^runs on as it was started, but this agent now refuses its configuration and will not start it again: network_mode = "host"/,
    );
    for (const job of ['plain-2', 'on-host']) await h.api.stopJob(job);
    await pollUntil('the probes stopped', async () => (containersUnder(h.root).length === 0 ? true : undefined));
  });

  it('an isolated hostpath plugin (socket at /csi, staging/publish base bidirectional) serves an isolated workload: what the plugin mounts inside its container is a mount on the host and in the workload', async () => {
    // The plugin is node code from this checkout: the task sees it (read-only) besides the default chroot, as the demo does.
    h.extraConfig = chrootEnvConfigWith(hostpathPluginCodeDirs());
    await h.start();
    await h.api.runJob(jobToNomadJson(await parseJobspec(hostpathPluginJobHcl({ driver: 'exec', node: nodeBinary() }), 'plugin.hcl')));
    const plugin = await pollUntil(
      'the isolated plugin healthy',
      async () => {
        const p = await h.api.getPlugin('hostpath').catch(() => undefined);
        return p && p.nodesHealthy === 1 && p.controllersHealthy === 1 ? p : undefined;
      },
      60_000,
    ).catch((err) => {
      // What went wrong, for the CI log: the plugin's output, its task events, the agent's log.
      for (const f of execFileSync('find', [path.join(h.dataDir, 'allocs'), '-name', 'std*.log'])
        .toString()
        .split('\n')
        .filter(Boolean))
        console.log(f, fs.readFileSync(f, 'utf8').slice(-2000));
      return h.api.listAllocs().then((allocs) => {
        console.log(
          JSON.stringify(
            allocs.map((a) => a.tasks),
            null,
            1,
          ).slice(-4000),
          h.log.slice(-3000),
        );
        throw err;
      });
    });
    const pluginAlloc = plugin.allocs[0]!;
    expect(containersUnder(h.root)).toEqual([containerId(pluginAlloc, 'plugin')]);
    await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('vol-iso'), 'v.hcl')));
    const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(isolatedJob('vol-iso'), 'iso.hcl')));
    const id = allocIds[0]!;
    const alloc = await pollUntil(
      'the isolated workload running with its file written',
      async () => {
        const a = await h.api.getAlloc(id);
        if (a.clientStatus === 'failed') throw new Error(`the workload failed: ${JSON.stringify(a.tasks)}`);
        return a.clientStatus === 'running' && a.volumes.data && fs.existsSync(path.join(a.volumes.data.hostPath, 'owner.txt'))
          ? a
          : undefined;
      },
      60_000,
    );
    const hostPath = alloc.volumes.data!.hostPath;
    // The plugin published it from inside its container; the mount is on the host (propagation, not a copy).
    expect(mountsUnder(hostPath)).toEqual([hostPath]);
    expect(fs.readFileSync(path.join(hostPath, 'owner.txt'), 'utf8').trim()).toBe(id);
    // And the file is in the plugin's own store: the volume's backing dir under its data dir.
    const store = path.join(h.dataDir, 'plugin-data', 'hostpath', 'state');
    const found = execFileSync('find', [store, '-name', 'owner.txt']).toString().trim().split('\n').filter(Boolean);
    expect(found).toHaveLength(1);
    expect(fs.readFileSync(found[0]!, 'utf8').trim()).toBe(id);

    // kill -9 of the agent with both isolated: nothing is killed, the mount stays, both are re-attached and the plugin serves again.
    const pluginPid = h.taskPid(pluginAlloc, 'plugin');
    const workloadPid = h.taskPid(id, 'writer');
    await h.kill('SIGKILL');
    expect([isAlive(pluginPid), isAlive(workloadPid)]).toEqual([true, true]);
    await h.start();
    await pollUntil(
      'both re-attached and the plugin healthy again',
      async () => {
        const p = await h.api.getPlugin('hostpath').catch(() => undefined);
        const a = await h.api.getAlloc(id);
        return p && p.nodesHealthy === 1 && a.clientStatus === 'running' && a.tasks.writer?.events.some((e) => e.type === 'Reattached')
          ? true
          : undefined;
      },
      60_000,
    );
    expect([h.taskPid(pluginAlloc, 'plugin'), h.taskPid(id, 'writer')]).toEqual([pluginPid, workloadPid]);
    expect(mountsUnder(hostPath)).toEqual([hostPath]);
    expect(fs.readFileSync(path.join(hostPath, 'owner.txt'), 'utf8').trim()).toBe(id);

    // Stopping unmounts through the isolated plugin, and leaves no container and no cgroup of the workload.
    await h.api.stopJob('iso');
    await pollUntil(
      'the workload stopped and unmounted',
      async () => ((await h.api.getAlloc(id)).clientStatus === 'complete' && mountsUnder(hostPath).length === 0 ? true : undefined),
      60_000,
    );
    expect(containersUnder(h.root)).toEqual([containerId(pluginAlloc, 'plugin')]);
    expect(cgroupsOf(containerId(id, 'writer'))).toEqual([]);
    await h.api.stopJob('hostpath-plugin');
    await pollUntil('the plugin stopped', async () => (containersUnder(h.root).length === 0 ? true : undefined), 60_000);
    expect(cgroupsOf(containerId(pluginAlloc, 'plugin'))).toEqual([]);
  });
});

/** The cgroup dirs (v1 or v2) named after a container, anywhere under /sys/fs/cgroup: runc's, left behind if any. */
function cgroupsOf(container: string): string[] {
  try {
    return execFileSync('find', ['/sys/fs/cgroup', '-maxdepth', '4', '-type', 'd', '-name', container], {
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .toString()
      .split('\n')
      .filter(Boolean);
  } catch (err) {
    // find exits 1 when some dir could not be read; what it printed still counts.
    return ((err as { stdout?: Buffer }).stdout?.toString() ?? '').split('\n').filter(Boolean);
  }
}
