// Nomad's per_alloc volumes end to end: a real agent process, the real
// hostpath plugin (gRPC over its unix socket, real bind mounts). A group of
// count 3 whose volume says `per_alloc = true` with source "db" mounts
// db[0], db[1] and db[2], one per alloc by its index — each alloc's file
// lands in its own volume's backing dir, in no other; and a job whose
// per-alloc volume db[2] is not in the catalog is refused at run and at
// plan, naming the missing id and what to do.
import * as fs from 'fs';
import * as path from 'path';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { hostpathPluginJobHcl, volumeHcl } from '../src/commands/specs';
import { AgentHarness, mountsUnder, pollUntil } from './support/agent-process';

jest.setTimeout(180_000);

/** A count-3 group whose volume "data" is per_alloc on source "db"; each alloc writes its id and index into its volume. */
const PER_ALLOC_JOB = `
job "db" {
  group "db" {
    count = 3
    volume "data" {
      type            = "csi"
      source          = "db"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
      per_alloc       = true
    }
    task "writer" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo \\"$NOMAD_ALLOC_ID $NOMAD_ALLOC_INDEX\\" > \\"$CSIPLUG_VOLUME_DATA/owner.txt\\" && exec sleep 3600"]
      }
      volume_mount {
        volume      = "data"
        destination = "data"
      }
    }
  }
}`;

describe('per_alloc volumes against the real hostpath plugin', () => {
  let h: AgentHarness;

  beforeEach(async () => {
    h = new AgentHarness();
    await h.start();
    await h.api.runJob(jobToNomadJson(await parseJobspec(hostpathPluginJobHcl({ restartDelay: '100ms' }), 'plugin.hcl')));
    await pollUntil('plugin hostpath healthy', async () => {
      const p = await h.api.getPlugin('hostpath').catch(() => undefined);
      return p && p.nodesHealthy === 1 && p.controllersHealthy === 1 ? p : undefined;
    });
  });
  afterEach(async () => {
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual([]);
  });

  const create = async (id: string) => h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeHcl(id), 'v.hcl')));
  /** The plugin's own directory of a volume (its state dir is under the plugin's data dir). */
  const backingDir = (externalId: string) => path.join(h.dataDir, 'plugin-data', 'hostpath', 'state', 'volumes', externalId);

  it('count = 3 with per_alloc = true on source "db" mounts db[0], db[1], db[2], one per alloc by its index', async () => {
    for (const id of ['db[0]', 'db[1]', 'db[2]']) await create(id);
    const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(PER_ALLOC_JOB, 'db.hcl')));
    expect(allocIds).toHaveLength(3);
    const allocs = await Promise.all(
      allocIds.map((id) =>
        pollUntil(`alloc ${id} running with its file written`, async () => {
          const a = await h.api.getAlloc(id);
          if (a.clientStatus === 'failed') throw new Error(`alloc ${id} failed: ${JSON.stringify(a.tasks)}`);
          const v = a.volumes['data'];
          return a.clientStatus === 'running' && v && fs.existsSync(path.join(v.hostPath, 'owner.txt')) ? a : undefined;
        }),
      ),
    );
    expect(allocs.map((a) => a.index).sort()).toEqual([0, 1, 2]);
    for (const a of allocs) {
      const volumeId = `db[${a.index}]`;
      expect(a.volumes['data']!.volumeId).toBe(volumeId);
      // Its mount is a real mount, its own.
      expect(mountsUnder(a.volumes['data']!.hostPath)).toEqual([a.volumes['data']!.hostPath]);
      // The file it wrote is in its own volume's backing dir, and the volume is claimed by it alone.
      const volume = await h.api.getVolume(volumeId);
      expect(volume.claims.map((c) => c.allocId)).toEqual([a.id]);
      expect(fs.readFileSync(path.join(backingDir(volume.externalId), 'owner.txt'), 'utf8')).toBe(`${a.id} ${a.index}\n`);
    }
    // Three volumes, three distinct backing dirs: no alloc wrote into another's.
    const dirs = await Promise.all(['db[0]', 'db[1]', 'db[2]'].map(async (id) => backingDir((await h.api.getVolume(id)).externalId)));
    expect(new Set(dirs).size).toBe(3);
  });

  it('refuses at job run and job plan a per_alloc job whose db[2] is not in the catalog, naming it and what to do; nothing is placed', async () => {
    for (const id of ['db[0]', 'db[1]']) await create(id);
    const doc = jobToNomadJson(await parseJobspec(PER_ALLOC_JOB, 'db.hcl'));
    const expected =
      'job "db" group "db" volume "data" has per_alloc = true, so its 3 allocs mount db[0], db[1], db[2], one each; ' +
      'db[2] is not in the volume catalog: register or create it first ("csiplug volume register FILE" or "csiplug volume create FILE", the file saying id = "db[2]")';
    for (const attempt of [() => h.api.runJob(doc), () => h.api.planJob(doc)]) {
      const err = await attempt().then(
        () => undefined,
        (e: unknown) => e as Error & { status?: number },
      );
      expect(err?.status).toBe(400);
      expect(err?.message).toContain(expected);
    }
    expect((await h.api.listAllocs()).filter((a) => a.jobId === 'db')).toEqual([]);
    // A count past limits { max_allocs_per_job } is refused for that before any per-alloc id is made (a count of a billion would build a billion).
    const huge = jobToNomadJson(await parseJobspec(PER_ALLOC_JOB.replace('count = 3', 'count = 1000000'), 'db.hcl'));
    for (const attempt of [() => h.api.runJob(huge), () => h.api.planJob(huge)]) {
      const err = await attempt().then(
        () => undefined,
        (e: unknown) => e as Error & { status?: number },
      );
      expect(err?.status).toBe(400);
      expect(err?.message).toContain('job "db" asks for 1000000 allocs (db: 1000000); this agent runs at most 256 per job');
    }
    // With db[2] created the same job runs.
    await create('db[2]');
    expect((await h.api.runJob(doc)).allocIds).toHaveLength(3);
  });
});
