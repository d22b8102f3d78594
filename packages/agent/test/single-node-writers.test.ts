// End to end, with the real agent, the hostpath plugin as a job, real
// processes and bind mounts: the two single-node writer modes. A
// single-node-multi-writer volume is mounted read-write by two allocs of two
// jobs at once, each seeing what the other writes; a single-node-single-
// writer volume is mounted by one writer, a second writer's `job run` is
// refused (409, and the CLI's words) naming the holder, `job run -detach`
// queues it, and it mounts once the holder is stopped.
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { promisify } from 'util';
import { ApiError } from '@csiplug/api';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { requireRoot } from '@csiplug/core/testing';
import { AgentHarness, BIN, PLUGIN_JOB, pollUntil } from './support/agent-process';

jest.setTimeout(300_000);
requireRoot();
const execFileP = promisify(execFile);

function volumeHcl(id: string, accessMode: string): string {
  return `
id        = "${id}"
name      = "${id}"
type      = "csi"
plugin_id = "hostpath"
capability {
  access_mode     = "${accessMode}"
  attachment_mode = "file-system"
}`;
}

/** A job whose one task writes its alloc id into the volume and sleeps. */
function writerHcl(jobId: string, volumeId: string, accessMode: string): string {
  return `
job "${jobId}" {
  group "app" {
    volume "data" {
      type            = "csi"
      source          = "${volumeId}"
      access_mode     = "${accessMode}"
      attachment_mode = "file-system"
    }
    task "writer" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \\"$CSIPLUG_ALLOC_ID\\" > \\"$CSIPLUG_VOLUME_DATA/$CSIPLUG_ALLOC_ID\\" && exec sleep 3600"]
      }
      kill_timeout = "1s"
      volume_mount {
        volume      = "data"
        destination = "data"
      }
    }
  }
}`;
}

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await execFileP(process.execPath, [BIN, ...args], { timeout: 120_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

describe('single-node-single-writer and single-node-multi-writer with the real agent and the hostpath plugin', () => {
  let h: AgentHarness;

  beforeAll(async () => {
    h = new AgentHarness();
    await h.start();
    await h.api.runJob(jobToNomadJson(await parseJobspec(PLUGIN_JOB, 'plugin.hcl')));
    await pollUntil(
      'plugin hostpath healthy',
      async () => ((await h.api.getPlugin('hostpath').catch(() => undefined))?.nodesHealthy === 1 ? true : undefined),
      60_000,
    );
  });
  afterAll(async () => {
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual([]);
  });

  const volume = async (id: string, accessMode: string) =>
    h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeHcl(id, accessMode), `${id}.hcl`)));
  const jobFile = (jobId: string, volumeId: string, accessMode: string): string => {
    const file = path.join(h.root, `${jobId}.hcl`);
    fs.writeFileSync(file, writerHcl(jobId, volumeId, accessMode));
    return file;
  };
  const run = async (jobId: string, volumeId: string, accessMode: string) =>
    h.api.runJob(jobToNomadJson(await parseJobspec(writerHcl(jobId, volumeId, accessMode), `${jobId}.hcl`)));
  /** The alloc running with its file written in its volume; the volume's path on the host. */
  const mounted = (allocId: string) =>
    pollUntil(
      `alloc ${allocId} running with its volume`,
      async () => {
        const a = await h.api.getAlloc(allocId);
        const dir = a.volumes.data?.hostPath;
        return a.clientStatus === 'running' && dir && fs.existsSync(path.join(dir, allocId)) ? dir : undefined;
      },
      60_000,
    );
  const address = () => ['-address', `http://127.0.0.1:${h.port}`];

  it('single-node-multi-writer: two allocs of two jobs write to the one volume at once', async () => {
    await volume('vol-multi', 'single-node-multi-writer');
    const a = (await run('multi-a', 'vol-multi', 'single-node-multi-writer')).allocIds[0]!;
    const b = (await run('multi-b', 'vol-multi', 'single-node-multi-writer')).allocIds[0]!;
    const [dirA, dirB] = [await mounted(a), await mounted(b)];
    expect(dirA).not.toBe(dirB);
    expect(fs.readdirSync(dirA).sort()).toEqual([a, b].sort());
    expect(fs.readdirSync(dirB).sort()).toEqual([a, b].sort());
    const claims = (await h.api.getVolume('vol-multi')).claims;
    expect(claims.map((c) => `${c.allocId} ${c.mode} ${c.accessMode}`).sort()).toEqual(
      [`${a} write single-node-multi-writer`, `${b} write single-node-multi-writer`].sort(),
    );
    await h.api.stopJob('multi-a');
    await h.api.stopJob('multi-b');
  });

  it('single-node-single-writer: one writer; a second is refused naming it, -detach queues it, and it mounts once the first stops', async () => {
    await volume('vol-single', 'single-node-single-writer');
    const first = (await run('single-a', 'vol-single', 'single-node-single-writer')).allocIds[0]!;
    await mounted(first);

    const words =
      `job "single-b" was not run, nothing was placed: group "app" writes to volume "vol-single" (single-node-single-writer: one writer at a time), ` +
      `and alloc ${first} (single-a.app[0], job "single-a", group "app") holds its write claim. ` +
      `To run it, stop the holder first (csiplug job stop single-a); or run it with -detach (the API's queue=true) to queue the placement until the claim is free`;
    const refused = await run('single-b', 'vol-single', 'single-node-single-writer').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ status: 409, code: 'ECONFLICT', message: words });
    const file = jobFile('single-b', 'vol-single', 'single-node-single-writer');
    const r = await cli(['job', 'run', ...address(), file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(words);
    await expect(h.api.getJob('single-b')).rejects.toMatchObject({ status: 404 });

    const queued = await cli(['job', 'run', '-detach', ...address(), file]);
    expect(queued).toMatchObject({ code: 0, stderr: '' });
    const second = (await h.api.getJob('single-b')).allocs[0]!.id;
    expect((await h.api.getAlloc(second)).clientStatus).toBe('pending');
    expect((await h.api.getVolume('vol-single')).claims.map((c) => c.allocId)).toEqual([first]);

    await h.api.stopJob('single-a');
    await mounted(second);
    expect((await h.api.getVolume('vol-single')).claims.map((c) => `${c.allocId} ${c.mode}`)).toEqual([`${second} write`]);
    await h.api.stopJob('single-b');
  });
});
