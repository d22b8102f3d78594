// A group's volume request, as Nomad's: per_alloc (alloc i mounts
// "<source>[i]") read from JSON and HCL, written back, named in the job diff,
// and refused where Nomad refuses it (a system job).
import { ValidationError } from '@csiplug/core';
import { diffGroup } from './job-diff';
import { jobToDocument, parseJobspec, validateJob } from './jobspec';

const VOLUME = 'job "web" group "app" volume "data"';

/** A job document with one group "app" of volume "data" (source vol-1) and task "server"; `type` its job type. */
function job(patch: { volume?: Record<string, unknown>; type?: string } = {}): unknown {
  return {
    job: {
      web: {
        ...(patch.type ? { type: patch.type } : {}),
        group: {
          app: {
            volume: { data: { type: 'csi', source: 'vol-1', access_mode: 'single-node-writer', ...(patch.volume ?? {}) } },
            task: { server: { driver: 'exec', config: { command: '/bin/true' } } },
          },
        },
      },
    },
  };
}

function errorOf(fn: () => unknown): ValidationError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

describe('volume per_alloc', () => {
  it("reads per_alloc (Nomad's: alloc i mounts source[i]; absent: false) and writes it back; the job diff names it", () => {
    const spec = validateJob(job({ volume: { per_alloc: true } }));
    expect(spec.groups[0]!.volumes[0]!.perAlloc).toBe(true);
    expect(validateJob(job({})).groups[0]!.volumes[0]).not.toHaveProperty('perAlloc');
    expect(validateJob(job({ volume: { per_alloc: false } })).groups[0]!.volumes[0]).not.toHaveProperty('perAlloc');
    expect(validateJob(jobToDocument(spec)).groups[0]!.volumes[0]!.perAlloc).toBe(true);
    const before = validateJob(job({}));
    expect(diffGroup(before, before.groups[0]!, spec.groups[0]!)).toEqual([
      expect.objectContaining({
        field: expect.stringMatching(/^volume ".*" per_alloc$/),
        kind: 'added',
        new: 'true',
        effect: 'destructive',
      }),
    ]);
  });

  it('reads per_alloc from HCL, as a Nomad jobspec writes it', async () => {
    const hcl = `job "db" {
  group "db" {
    count = 3
    volume "data" {
      type        = "csi"
      source      = "db"
      access_mode = "single-node-writer"
      per_alloc   = true
    }
    task "db" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
`;
    expect((await parseJobspec(hcl, 'db.hcl')).groups[0]!.volumes[0]).toMatchObject({ source: 'db', perAlloc: true });
  });

  it('refuses per_alloc that is not true or false', () => {
    expect(errorOf(() => validateJob(job({ volume: { per_alloc: 'yes' } }))).message).toBe(
      `${VOLUME}: per_alloc must be true or false (got "yes")`,
    );
  });

  it("refuses per_alloc in a system job, in Nomad's words, saying what to do", () => {
    expect(errorOf(() => validateJob(job({ type: 'system', volume: { per_alloc: true } }))).message).toBe(
      `${VOLUME}: per_alloc volume cannot be per_alloc for system or sysbatch jobs: a system job runs one alloc per node, all with index 0; ` +
        'remove per_alloc = true (every node then mounts the volume of source), or make the job type "service" with a count',
    );
    expect(validateJob(job({ type: 'system' })).groups[0]!.volumes[0]).not.toHaveProperty('perAlloc');
  });
});
