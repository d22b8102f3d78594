// Whom an isolated task runs as, and what it can leave behind, on the real
// runc (issue 25, items 4 and 5): a task with no `user` runs as nobody (as
// Nomad's exec driver), sees no /etc/shadow (the default chroot binds only
// what programs need of /etc), still writes its hostpath volume, and cannot
// plant a setuid-root binary or a device node another host user could use;
// `user = "root"` is refused unless `plugin "exec" { allowed_users }` lists
// it, and a root task's device node is inert in its own dirs (nodev).
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { workloadJobHcl } from '../src/commands/specs';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { AgentHarness, PLUGIN_JOB, pollUntil, volumeSpec } from './support/agent-process';

jest.setTimeout(120_000);

const NOBODY = 65534;

/** Runs `argv` on the host as nobody (no groups): what another local user could do. */
function asNobody(argv: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync('/usr/bin/setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', ...argv], {
    encoding: 'utf8',
    timeout: 10_000,
  });
  return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}

const jobOf = (id: string, body: string, user?: string) => `
job "${id}" {
  group "app" {
    task "main" {
      driver = "exec"
      ${user !== undefined ? `user = "${user}"` : ''}
      config {
        command = "/bin/sh"
        args    = ["-c", ${JSON.stringify(`${body}; echo done > /local/done; exec sleep 3600`)}]
      }
      kill_timeout = "1s"
    }
  }
}`;

describe('isolated tasks: their user and what they can leave on the host', () => {
  let h: AgentHarness;

  beforeEach(() => {
    h = new AgentHarness();
    // The harness's root is 0700 (mkdtemp): open it as a data dir's parent usually is (/var/lib), so only the data dir's own modes keep other users out.
    fs.chmodSync(h.root, 0o755);
  });
  afterEach(async () => {
    const { leftMounts, leftContainers } = await h.cleanup();
    expect(leftMounts).toEqual([]);
    expect(leftContainers).toEqual([]);
  });

  /** Runs the job; its alloc once its task wrote /local/done, and the alloc's dir on the host. */
  const runUntilDone = async (hcl: string, task = 'main') => {
    const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(hcl, 'job.hcl')));
    const id = allocIds[0]!;
    const local = path.join(h.dataDir, 'allocs', id, task, 'local');
    const alloc = await pollUntil(`task ${task} of ${id} done`, async () => {
      const a = await h.api.getAlloc(id);
      if (a.clientStatus === 'failed') return a;
      return a.clientStatus === 'running' && fs.existsSync(path.join(local, 'done')) ? a : undefined;
    });
    return { alloc, local, allocDir: path.join(h.dataDir, 'allocs', id) };
  };

  it('runs as nobody by default, sees no /etc/shadow, writes its hostpath volume, and what it plants in /alloc and /local no other host user can run or open', async () => {
    await h.start();
    await h.api.runJob(jobToNomadJson(await parseJobspec(PLUGIN_JOB, 'plugin.hcl')));
    await pollUntil('plugin hostpath healthy', async () => {
      const p = await h.api.getPlugin('hostpath').catch(() => undefined);
      return p && p.nodesHealthy === 1 ? p : undefined;
    });
    await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('vol-nobody'), 'v.hcl')));
    const script = [
      'id -u > /local/uid',
      '{ cat /etc/shadow; } > /local/shadow 2>&1',
      'ls /etc > /local/etc',
      'echo written > "$CSIPLUG_VOLUME_DATA/by-task" 2> /local/volume-err',
      // A setuid copy of id (it prints the effective uid) and a 0666 null device, in the shared dir and its own.
      'for d in /alloc /local; do cp /usr/bin/id $d/id && chmod 4755 $d/id; mknod -m 666 $d/null c 1 3 2>> /local/mknod-err; done',
      'echo done > /local/done; exec sleep 3600',
    ].join('; ');
    const { allocIds } = await h.api.runJob(
      jobToNomadJson(await parseJobspec(workloadJobHcl('planter', 'vol-nobody', script, 'exec'), 'w.hcl')),
    );
    const id = allocIds[0]!;
    const allocDir = path.join(h.dataDir, 'allocs', id);
    const local = path.join(allocDir, 'writer', 'local');
    const alloc = await pollUntil('the planter done', async () => {
      const a = await h.api.getAlloc(id);
      if (a.clientStatus === 'failed') throw new Error(`the task failed: ${JSON.stringify(a.tasks)}`);
      return a.clientStatus === 'running' && fs.existsSync(path.join(local, 'done')) ? a : undefined;
    });

    // Nomad's default user.
    expect(fs.readFileSync(path.join(local, 'uid'), 'utf8').trim()).toBe(String(NOBODY));
    // /etc holds what programs need, not the shadow file (nor any key).
    const etc = fs.readFileSync(path.join(local, 'etc'), 'utf8').split('\n').filter(Boolean);
    expect(etc).toEqual(expect.arrayContaining(['passwd', 'group', 'hosts']));
    expect(etc).not.toContain('shadow');
    expect(fs.readFileSync(path.join(local, 'shadow'), 'utf8')).not.toMatch(/^root:/m);
    // Its volume takes its writes as nobody.
    expect(fs.readFileSync(path.join(local, 'volume-err'), 'utf8')).toBe('');
    const byTask = path.join(alloc.volumes.data!.hostPath, 'by-task');
    expect(fs.readFileSync(byTask, 'utf8')).toBe('written\n');
    expect(fs.statSync(byTask).uid).toBe(NOBODY);

    // What it planted: no device node (nobody may not mknod), no setuid file of root's.
    for (const dir of [path.join(allocDir, 'alloc'), local]) {
      expect(fs.existsSync(path.join(dir, 'null'))).toBe(false);
      const planted = fs.statSync(path.join(dir, 'id'));
      expect(planted.uid === 0 && (planted.mode & 0o4000) !== 0).toBe(false);
    }
    // And another host user reaches none of it: every dir on the way is 0700.
    for (const dir of [
      h.dataDir,
      path.join(h.dataDir, 'allocs'),
      allocDir,
      path.join(allocDir, 'writer'),
      path.join(allocDir, 'alloc'),
      local,
    ]) {
      expect({ dir, mode: (fs.statSync(dir).mode & 0o777).toString(8) }).toEqual({ dir, mode: '700' });
    }
    for (const dir of [path.join(allocDir, 'alloc'), local]) {
      const ran = asNobody([path.join(dir, 'id'), '-u']);
      expect(ran.status !== 0 || ran.stdout.trim() !== '0').toBe(true);
      expect(asNobody(['/bin/sh', '-c', `echo x > ${path.join(dir, 'null')}`]).status).not.toBe(0);
    }
    await h.api.stopJob('planter');
  });

  it('user = "root" is refused unless plugin "exec" { allowed_users } lists it; then it runs as root, and a device node in its own dirs is inert (nodev)', async () => {
    await h.start();
    const refused = await runUntilDone(jobOf('as-root', 'id -u > /local/uid', 'root'));
    expect(refused.alloc.clientStatus).toBe('failed');
    expect(refused.alloc.tasks.main!.events.map((e) => e.message)).toContainEqual(
      expect.stringContaining(
        'user "root" is root, which this agent does not run isolated tasks as unless plugin "exec" { allowed_users } lists it',
      ),
    );
    expect(fs.existsSync(path.join(refused.local, 'uid'))).toBe(false);
    // An unknown user is refused with its name.
    const unknown = await runUntilDone(jobOf('as-ghost', 'id -u > /local/uid', 'csiplug-no-such-user'));
    expect(unknown.alloc.clientStatus).toBe('failed');
    expect(unknown.alloc.tasks.main!.events.map((e) => e.message)).toContainEqual(
      expect.stringContaining('user "csiplug-no-such-user" does not exist on this host'),
    );
    await h.kill('SIGTERM');

    h.extraConfig = 'plugin "exec" {\n  allowed_users = ["root", "nobody"]\n}';
    await h.start();
    const script =
      'id -u > /local/uid; mknod -m 666 /alloc/null c 1 3 2> /local/mknod-err; { echo x > /alloc/null; } 2> /local/open-err; grep -E " /(alloc|local|secrets) " /proc/self/mountinfo > /local/mounts';
    const root = await runUntilDone(jobOf('as-root-allowed', script, 'root'));
    expect(root.alloc.clientStatus).toBe('running');
    expect(fs.readFileSync(path.join(root.local, 'uid'), 'utf8').trim()).toBe('0');
    // root may make the node (CAP_MKNOD), but not open it where it is: its own dirs are nodev (and nosuid).
    expect(fs.readFileSync(path.join(root.local, 'open-err'), 'utf8')).toMatch(/Permission denied/);
    const mounts = fs.readFileSync(path.join(root.local, 'mounts'), 'utf8').trim().split('\n');
    expect(mounts).toHaveLength(3);
    for (const m of mounts) expect(m.split(' ')[5]!.split(',')).toEqual(expect.arrayContaining(['nosuid', 'nodev']));
    // A user the list names runs as it.
    const nobody = await runUntilDone(jobOf('as-nobody', 'id -u > /local/uid', 'nobody'));
    expect(fs.readFileSync(path.join(nobody.local, 'uid'), 'utf8').trim()).toBe(String(NOBODY));
    for (const job of ['as-root-allowed', 'as-nobody']) await h.api.stopJob(job);
  });
});
