// Public face of @csiplug/jobspec/testing: jobs and allocs for tests of
// whatever plans, rolls out or serves jobs. Jobs go through the real jobspec
// reader, so a test's job is one the agent would accept.
import type { Alloc, JobSpec } from '../model';
import { validateJob } from '../jobspec';

export interface GroupOptions {
  count?: number;
  env?: Record<string, string>;
  plugin?: string;
  volume?: { source: string; accessMode?: string; readOnly?: boolean; perAlloc?: boolean };
  update?: Record<string, unknown>;
  restart?: Record<string, unknown>;
}

/** A job of one or more groups, each with one task `main`, read by the real jobspec reader. */
export function makeJob(id: string, groups: Record<string, GroupOptions>, extra: Record<string, unknown> = {}): JobSpec {
  const group = (o: GroupOptions) => ({
    count: o.count ?? 1,
    ...(o.update ? { update: o.update } : {}),
    ...(o.restart ? { restart: o.restart } : {}),
    ...(o.volume
      ? {
          volume: {
            data: {
              type: 'csi',
              source: o.volume.source,
              access_mode: o.volume.accessMode ?? 'single-node-writer',
              read_only: o.volume.readOnly ?? false,
              ...(o.volume.perAlloc ? { per_alloc: true } : {}),
            },
          },
        }
      : {}),
    task: {
      main: {
        driver: 'raw_exec',
        config: { command: '/bin/sleep', args: ['1000'] },
        env: o.env ?? {},
        ...(o.plugin ? { csi_plugin: { id: o.plugin, type: 'monolith' } } : {}),
        ...(o.volume ? { volume_mount: { volume: 'data', destination: 'data' } } : {}),
      },
    },
  });
  return validateJob({ job: { [id]: { ...extra, group: Object.fromEntries(Object.entries(groups).map(([n, o]) => [n, group(o)])) } } });
}

let nextId = 0;
/** A uuid-shaped id, distinct in its first 8 characters. */
export function allocId(): string {
  const n = String(++nextId).padStart(8, '0');
  return `${n}-0000-4000-8000-000000000000`;
}

/** An alloc record of `job`, running at `index` of `group`. */
export function makeAlloc(job: JobSpec, group: string, index: number, patch: Partial<Alloc> = {}): Alloc {
  return {
    id: allocId(),
    jobId: job.id,
    group,
    index,
    name: `${job.id}.${group}[${index}]`,
    job,
    jobVersion: 0,
    desiredStatus: 'run',
    clientStatus: 'running',
    createdAt: 1,
    ...patch,
  };
}

/** A fake alloc runner: its tasks are whatever the test sets; stop() records itself and, if gated, waits. */
