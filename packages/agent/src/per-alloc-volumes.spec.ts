// The per_alloc refusal names a few missing ids and counts the rest: a job of
// count 500 missing all its volumes gets a message of a line, not of 500 ids.
import { parseJobspec } from '@csiplug/jobspec';
import { MAX_IDS_NAMED, assertPerAllocVolumesExist } from './per-alloc-volumes';

const job = (count: number) => `
job "db" {
  group "db" {
    count = ${count}
    volume "data" {
      type            = "csi"
      source          = "db"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
      per_alloc       = true
    }
    task "t" {
      driver = "exec"
      config {
        command = "/bin/true"
      }
    }
  }
}`;

const refusal = (f: () => void): string => {
  try {
    f();
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('not refused');
};

describe('assertPerAllocVolumesExist', () => {
  it(`names at most ${MAX_IDS_NAMED} missing ids, then how many more; the ids mounted as a range`, async () => {
    const spec = await parseJobspec(job(500), 'db.hcl');
    const message = refusal(() => assertPerAllocVolumesExist(spec, (id) => id === 'db[3]'));
    expect(message).toContain('its 500 allocs mount db[0] to db[499], one each; ');
    expect(message).toContain(
      'db[0], db[1], db[2], db[4], db[5], db[6], db[7], db[8], db[9], db[10] and 489 more are not in the volume catalog',
    );
    expect(message.length).toBeLessThan(600);
  });

  it('names each id when there are few', async () => {
    const spec = await parseJobspec(job(3), 'db.hcl');
    expect(refusal(() => assertPerAllocVolumesExist(spec, (id) => id !== 'db[2]'))).toContain(
      'its 3 allocs mount db[0], db[1], db[2], one each; db[2] is not in the volume catalog',
    );
  });
});
