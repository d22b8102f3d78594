import { ValidationError } from '@csiplug/core';
import { parse as hcl2jsonParse } from '@cdktn/hcl2json';
import type { JobSpec } from './model';
import { inSourceOrder } from './hcl-source-order';
import { DEFAULT_RESTART, DEFAULT_UPDATE, ValidationProblems, jobToDocument, parseJobspec, validateJob } from './jobspec';

const FULL_HCL = `
job "web" {
  name = "Web site"

  group "app" {
    count = 2

    restart {
      attempts = 3
      delay    = "5s"
    }

    volume "data" {
      type            = "csi"
      source          = "vol-1"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"

      mount_options {
        fs_type     = "ext4"
        mount_flags = ["noatime", "nodev"]
      }
    }

    volume "ro" {
      type        = "csi"
      source      = "vol-2"
      access_mode = "multi-node-reader-only"
      read_only   = true
    }

    task "server" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo \${CSIPLUG_ALLOC_ID} $\${HOME}"]
      }

      env {
        FOO = "bar"
        URL = "http://\${CSIPLUG_NODE_ID}"
      }

      volume_mount {
        volume      = "data"
        destination = "/srv/data"
      }

      volume_mount {
        volume      = "ro"
        destination = "ro"
      }

      restart {
        mode = "delay"
      }

      kill_signal  = "SIGINT"
      kill_timeout = "30s"
    }

    task "plugin" {
      driver = "exec"

      config {
        command = "node"
      }

      csi_plugin {
        id             = "hostpath"
        type           = "monolith"
        health_timeout = "1m"
      }
    }
  }
}
`;

const FULL_JSON_NATURAL = {
  job: {
    web: {
      name: 'Web site',
      group: {
        app: {
          count: 2,
          restart: { attempts: 3, delay: '5s' },
          volume: {
            data: {
              type: 'csi',
              source: 'vol-1',
              access_mode: 'single-node-writer',
              attachment_mode: 'file-system',
              mount_options: { fs_type: 'ext4', mount_flags: ['noatime', 'nodev'] },
            },
            ro: { type: 'csi', source: 'vol-2', access_mode: 'multi-node-reader-only', read_only: true },
          },
          task: {
            server: {
              driver: 'raw_exec',
              config: { command: '/bin/sh', args: ['-c', 'echo ${CSIPLUG_ALLOC_ID} $${HOME}'] },
              env: { FOO: 'bar', URL: 'http://${CSIPLUG_NODE_ID}' },
              volume_mount: [
                { volume: 'data', destination: '/srv/data' },
                { volume: 'ro', destination: 'ro' },
              ],
              restart: { mode: 'delay' },
              kill_signal: 'SIGINT',
              kill_timeout: '30s',
            },
            plugin: {
              driver: 'exec',
              config: { command: 'node' },
              csi_plugin: { id: 'hostpath', type: 'monolith', health_timeout: '1m' },
            },
          },
        },
      },
    },
  },
};

const EXPECTED: JobSpec = {
  id: 'web',
  name: 'Web site',
  groups: [
    {
      name: 'app',
      count: 2,
      restart: { attempts: 3, interval: 30 * 60_000, delay: 5_000, mode: 'fail' },
      update: { maxParallel: 1, minHealthyTime: 10_000, healthyDeadline: 5 * 60_000, autoRevert: false },
      volumes: [
        {
          name: 'data',
          type: 'csi',
          source: 'vol-1',
          accessMode: 'single-node-writer',
          attachmentMode: 'file-system',
          readOnly: false,
          mountOptions: { fsType: 'ext4', mountFlags: ['noatime', 'nodev'] },
        },
        { name: 'ro', type: 'csi', source: 'vol-2', accessMode: 'multi-node-reader-only', attachmentMode: 'file-system', readOnly: true },
      ],
      tasks: [
        {
          name: 'plugin',
          driver: 'exec',
          isolated: true,
          config: { command: 'node', args: [] },
          env: {},
          csiPlugin: { id: 'hostpath', type: 'monolith', mountDir: '/csi', stagePublishBaseDir: '/local/csi', healthTimeout: 60_000 },
          volumeMounts: [],
          restart: { attempts: 3, interval: 30 * 60_000, delay: 5_000, mode: 'fail' },
          killSignal: 'SIGTERM',
          killTimeout: 5_000,
        },
        {
          name: 'server',
          driver: 'raw_exec',
          isolated: false,
          config: { command: '/bin/sh', args: ['-c', 'echo ${CSIPLUG_ALLOC_ID} $${HOME}'] },
          env: { FOO: 'bar', URL: 'http://${CSIPLUG_NODE_ID}' },
          volumeMounts: [
            { volume: 'data', destination: '/srv/data', readOnly: false },
            { volume: 'ro', destination: 'ro', readOnly: true },
          ],
          restart: { attempts: 3, interval: 30 * 60_000, delay: 5_000, mode: 'delay' },
          killSignal: 'SIGINT',
          killTimeout: 30_000,
        },
      ],
    },
  ],
};

/** A minimal valid job in the natural JSON form, with `patch` applied to its task/group/volume. */
function job(
  patch: { group?: Record<string, unknown>; task?: Record<string, unknown>; volume?: Record<string, unknown> | null } = {},
): unknown {
  const volume =
    patch.volume === null ? undefined : { type: 'csi', source: 'vol-1', access_mode: 'single-node-writer', ...(patch.volume ?? {}) };
  return {
    job: {
      web: {
        group: {
          app: {
            ...(volume ? { volume: { data: volume } } : {}),
            task: { server: { driver: 'exec', config: { command: '/bin/true' }, ...(patch.task ?? {}) } },
            ...(patch.group ?? {}),
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

async function asyncErrorOf(p: Promise<unknown>): Promise<ValidationError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return err as ValidationError;
  }
  throw new Error('expected a ValidationError');
}

const TASK = 'job "web" group "app" task "server"';
const GROUP = 'job "web" group "app"';
const VOLUME = 'job "web" group "app" volume "data"';

describe('parseJobspec', () => {
  it('parses a full HCL job with every default filled in', async () => {
    expect(await parseJobspec(FULL_HCL, 'web.nomad.hcl')).toEqual(EXPECTED);
  });

  it('parses the same job in natural JSON to a deep-equal JobSpec', async () => {
    expect(await parseJobspec(JSON.stringify(FULL_JSON_NATURAL, null, 2), 'web.json')).toEqual(EXPECTED);
  });

  it('parses the hcl2json form of the same job in a JSON file', async () => {
    const hcl2json = await hcl2jsonParse('web.hcl', FULL_HCL);
    expect(await parseJobspec(JSON.stringify(hcl2json), 'web.json')).toEqual(EXPECTED);
  });

  it('decides the format by extension, then by a leading "{"', async () => {
    const json = JSON.stringify(job());
    expect((await parseJobspec(json, 'job')).id).toBe('web');
    expect((await parseJobspec(`  \n${json}`, 'job.txt')).id).toBe('web');
    expect(
      (await parseJobspec('job "a" {\n group "g" {\n task "t" {\n driver = "exec"\n config {\n command = "x"\n }\n }\n }\n}\n', 'a.nomad'))
        .id,
    ).toBe('a');
    // A .hcl file is HCL even if it starts with "{".
    expect((await asyncErrorOf(parseJobspec(json, 'job.hcl'))).message).toMatch(/^job\.hcl: invalid HCL: /);
  });

  it('fills defaults: count 1, Nomad service restart, SIGTERM, 5s kill timeout, file-system, not read-only', async () => {
    const spec = validateJob(job({ task: { volume_mount: { volume: 'data', destination: 'd' } } }));
    const group = spec.groups[0]!;
    expect(spec.name).toBe('web');
    expect(group.count).toBe(1);
    expect(group.restart).toEqual(DEFAULT_RESTART);
    expect(group.restart).toEqual({ attempts: 2, interval: 1_800_000, delay: 15_000, mode: 'fail' });
    expect(group.volumes[0]).toEqual({
      name: 'data',
      type: 'csi',
      source: 'vol-1',
      accessMode: 'single-node-writer',
      attachmentMode: 'file-system',
      readOnly: false,
    });
    const task = group.tasks[0]!;
    expect(task).toEqual({
      name: 'server',
      driver: 'exec',
      isolated: true,
      config: { command: '/bin/true', args: [] },
      env: {},
      volumeMounts: [{ volume: 'data', destination: 'd', readOnly: false }],
      restart: DEFAULT_RESTART,
      killSignal: 'SIGTERM',
      killTimeout: 5_000,
    });
    expect(task.csiPlugin).toBeUndefined();
  });

  it('reads the two single-node writer modes of CSI (Nomad names), as writers', async () => {
    const hcl = (mode: string) =>
      `job "web" {\n group "app" {\n volume "data" {\n type = "csi"\n source = "vol-1"\n access_mode = "${mode}"\n attachment_mode = "file-system"\n }\n` +
      ` task "server" {\n driver = "exec"\n config {\n command = "/bin/true"\n }\n volume_mount {\n volume = "data"\n destination = "/data"\n }\n }\n }\n}\n`;
    for (const mode of ['single-node-single-writer', 'single-node-multi-writer']) {
      const volume = (await parseJobspec(hcl(mode), 'web.nomad.hcl')).groups[0]!.volumes[0]!;
      expect(volume).toEqual({
        name: 'data',
        type: 'csi',
        source: 'vol-1',
        accessMode: mode,
        attachmentMode: 'file-system',
        readOnly: false,
      });
    }
  });

  it('merges a task restart block over the group one, field by field', () => {
    const spec = validateJob(job({ group: { restart: { attempts: 7, interval: '1h' } }, task: { restart: { delay: '1s' } } }));
    expect(spec.groups[0]!.tasks[0]!.restart).toEqual({ attempts: 7, interval: 3_600_000, delay: 1_000, mode: 'fail' });
  });

  it('takes durations as numbers of milliseconds too', () => {
    const task = validateJob(job({ task: { kill_timeout: 250, restart: { delay: 0 } } })).groups[0]!.tasks[0]!;
    expect(task.killTimeout).toBe(250);
    expect(task.restart.delay).toBe(0);
  });

  it('mounts read-only when the group volume is read-only, whatever the mount says', () => {
    const spec = validateJob(
      job({ volume: { read_only: true }, task: { volume_mount: { volume: 'data', destination: 'd', read_only: false } } }),
    );
    expect(spec.groups[0]!.tasks[0]!.volumeMounts[0]!.readOnly).toBe(true);
  });

  it('sorts groups, tasks and volumes by name (hcl2json sorts labels, so both forms agree)', async () => {
    const text = ['b', 'a']
      .map(
        (g) =>
          `group "${g}" {\n task "z" {\n driver = "exec"\n config {\n command = "x"\n }\n }\n task "y" {\n driver = "exec"\n config {\n command = "x"\n }\n }\n}`,
      )
      .join('\n');
    const spec = await parseJobspec(`job "j" {\n${text}\n}\n`, 'j.hcl');
    expect(spec.groups.map((g) => g.name)).toEqual(['a', 'b']);
    expect(spec.groups[0]!.tasks.map((t) => t.name)).toEqual(['y', 'z']);
  });

  it('keeps the order of volume_mount blocks', () => {
    const spec = validateJob(
      job({
        group: {
          volume: {
            z: { type: 'csi', source: 'v1', access_mode: 'single-node-writer' },
            a: { type: 'csi', source: 'v2', access_mode: 'single-node-writer' },
          },
        },
        task: {
          volume_mount: [
            { volume: 'z', destination: 'z' },
            { volume: 'a', destination: 'a' },
          ],
        },
      }),
    );
    expect(spec.groups[0]!.tasks[0]!.volumeMounts.map((m) => m.volume)).toEqual(['z', 'a']);
  });

  it('accepts env and config written as attributes in HCL', async () => {
    const text =
      'job "j" {\n group "g" {\n task "t" {\n driver = "exec"\n config = { command = "x", args = ["1"] }\n env = { A = "b" }\n }\n }\n}\n';
    const task = (await parseJobspec(text, 'j.hcl')).groups[0]!.tasks[0]!;
    expect(task.config).toEqual({ command: 'x', args: ['1'] });
    expect(task.env).toEqual({ A: 'b' });
  });

  it('keeps an env key named __proto__ as plain data', () => {
    const raw = JSON.parse(
      '{"job":{"j":{"group":{"g":{"task":{"t":{"driver":"exec","config":{"command":"x"},"env":{"__proto__":"v"}}}}}}}}',
    );
    const env = validateJob(raw).groups[0]!.tasks[0]!.env;
    expect(Object.getPrototypeOf(env)).toBe(Object.prototype);
    expect(Object.prototype.hasOwnProperty.call(env, '__proto__')).toBe(true);
  });

  it('prefixes errors with the file name', async () => {
    const text = 'job "web" {\n group "app" {\n task "server" {\n driver = "exec"\n config {\n args = []\n }\n }\n }\n}\n';
    const err = await asyncErrorOf(parseJobspec(text, 'web.hcl'));
    expect(err.message).toBe(`web.hcl: ${TASK}: config.command is required`);
    expect(err.field).toBe('config.command');
  });

  it('reports HCL syntax errors with file, line and column', async () => {
    const err = await asyncErrorOf(parseJobspec('job "x" {\n  count = \n}\n', 'x.hcl'));
    expect(err.message).toMatch(/^x\.hcl: invalid HCL: x\.hcl:2,\d+-(\d+,)?\d+: /);
  });

  it('reports invalid JSON', async () => {
    expect((await asyncErrorOf(parseJobspec('{"job": ', 'x.json'))).message).toMatch(/^x\.json: invalid JSON: /);
    expect((await asyncErrorOf(parseJobspec('[]', 'x.json'))).message).toBe('x.json: the document must be an object');
  });

  it('reports an attribute set twice in HCL', async () => {
    const err = await asyncErrorOf(parseJobspec('job "x" {\n name = "a"\n name = "b"\n}\n', 'x.hcl'));
    expect(err.message).toMatch(/Attribute redefined/);
  });
});

describe('validateJob', () => {
  it('reads resources { cpu, memory } (MHz as cpu shares, MiB as a memory limit) and keeps them through jobToDocument', async () => {
    const job = await parseJobspec(
      'job "r" {\n group "g" {\n task "t" {\n driver = "exec"\n config {\n command = "x"\n }\n resources {\n cpu = 500\n memory = 256\n }\n }\n }\n}\n',
      'r.hcl',
    );
    expect(job.groups[0]!.tasks[0]!.resources).toEqual({ cpu: 500, memoryMB: 256 });
    expect(validateJob(jobToDocument(job))).toEqual(job);
  });

  it("reads an isolated task's user (Nomad's task user; absent: the agent runs it as nobody) and keeps it through jobToDocument", async () => {
    const parsed = await parseJobspec(
      'job "u" {\n group "g" {\n task "t" {\n driver = "exec"\n user = "www-data"\n config {\n command = "x"\n }\n }\n }\n}\n',
      'u.hcl',
    );
    expect(parsed.groups[0]!.tasks[0]!.user).toBe('www-data');
    expect(validateJob(jobToDocument(parsed))).toEqual(parsed);
    expect(validateJob(job()).groups[0]!.tasks[0]!.user).toBeUndefined();
  });

  it('accepts the document wrapped as { Job: … }', () => {
    expect(validateJob({ Job: FULL_JSON_NATURAL })).toEqual(EXPECTED);
  });

  it('round-trips through jobToDocument', () => {
    const doc = jobToDocument(EXPECTED);
    expect(validateJob(doc)).toEqual(EXPECTED);
    expect(validateJob(JSON.parse(JSON.stringify(doc)))).toEqual(EXPECTED);
    expect(doc.job.web!.group.app!.task.server!.kill_timeout).toBe('30s');
  });

  it('reads type = "system" (one alloc per node, count 1) and keeps it through jobToDocument; a service job has no type', () => {
    const doc = job() as { job: { web: Record<string, unknown> } };
    doc.job.web.type = 'system';
    const spec = validateJob(doc);
    expect(spec.type).toBe('system');
    expect(spec.groups[0]!.count).toBe(1);
    expect(validateJob(jobToDocument(spec))).toEqual(spec);
    expect(validateJob(job()).type).toBeUndefined();
    (doc.job.web as { type: string }).type = 'service';
    expect(validateJob(doc).type).toBeUndefined();
  });

  it('round-trips fractional durations as numbers', () => {
    const spec = validateJob(job({ task: { kill_timeout: '1s500us' } }));
    expect(spec.groups[0]!.tasks[0]!.killTimeout).toBe(1000.5);
    expect(validateJob(jobToDocument(spec))).toEqual(spec);
  });

  it.each<[string, unknown, string]>([
    ['not an object', 'job', 'a jobspec must be an object like { "job": { "<id>": { … } } }'],
    ['no job', {}, 'a jobspec must hold exactly one job block, like job "<id>" { … } (found 0)'],
    [
      'two jobs',
      { job: { a: { group: {} }, b: { group: {} } } },
      'a jobspec must hold exactly one job block, like job "<id>" { … } (found 2)',
    ],
    [
      'an unknown top-level key',
      { job: {}, jobs: 1 },
      'a jobspec must hold exactly one job block, like job "<id>" { … } (found 0)\njobs is not a known field (known: job)',
    ],
    ['job not labelled', { job: [{ group: {} }] }, 'job must be labelled blocks, like job "name" { … } (got [{"group":{}}])'],
    [
      'a job id with a slash',
      { job: { 'a/b': { group: {} } } },
      'job id "a/b" is not allowed: it may not contain "/", "..", or NUL\njob "a/b": needs at least one group',
    ],
    [
      'a job id with ..',
      { job: { '..': { group: {} } } },
      'job id ".." is not allowed: it may not contain "/", "..", or NUL\njob "..": needs at least one group',
    ],
    ['a job without groups', { job: { web: {} } }, 'job "web": needs at least one group'],
    [
      'an unknown job field',
      { job: { web: { flavour: 'x', group: {} } } },
      'job "web": flavour is not a known field (known: name, type, datacenters, update, group)\njob "web": needs at least one group',
    ],
    ['a group without tasks', { job: { web: { group: { app: {} } } } }, `${GROUP}: needs at least one task`],
    [
      'a group name with a slash',
      { job: { web: { group: { 'x/y': {} } } } },
      'job "web": group name "x/y" is not allowed: it may not contain "/", "..", or NUL\njob "web" group "x/y": needs at least one task',
    ],
    ['a group not a block', { job: { web: { group: { app: 3 } } } }, 'job "web": group "app" must be a block (got 3)'],
  ])('rejects %s', (_name, raw, message) => {
    expect(errorOf(() => validateJob(raw)).message).toBe(message);
  });

  it('rejects a group defined twice (hcl2json form)', async () => {
    const text = 'job "web" {\n group "app" {\n }\n group "app" {\n }\n}\n';
    const err = await asyncErrorOf(parseJobspec(text, 'web.hcl'));
    expect(err.message).toBe('web.hcl: job "web": group "app" is defined 2 times; group names must be unique');
  });

  it('rejects a task or volume defined twice (hcl2json form)', async () => {
    const task = ' task "t" {\n driver = "exec"\n config {\n command = "x"\n }\n }\n';
    expect((await asyncErrorOf(parseJobspec(`job "web" {\n group "app" {\n${task}${task} }\n}\n`, 'w.hcl'))).message).toBe(
      `w.hcl: ${GROUP}: task "t" is defined 2 times; task names must be unique`,
    );
    const vol = ' volume "v" {\n type = "csi"\n source = "s"\n access_mode = "single-node-writer"\n }\n';
    expect((await asyncErrorOf(parseJobspec(`job "web" {\n group "app" {\n${vol}${vol}${task} }\n}\n`, 'w.hcl'))).message).toBe(
      `w.hcl: ${GROUP}: volume "v" is defined 2 times; volume names must be unique`,
    );
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['count 0', { count: 0 }, `${GROUP}: count must be at least 1 (got 0)`],
    ['count 1.5', { count: 1.5 }, `${GROUP}: count must be a whole number (got 1.5)`],
    ['count as a string', { count: '2' }, `${GROUP}: count must be a whole number (got "2")`],
    [
      'an unknown group field',
      { networking: {} },
      `${GROUP}: networking is not a known field (known: count, restart, update, volume, task)`,
    ],
    ['a bad restart mode', { restart: { mode: 'retry' } }, `${GROUP}: restart.mode must be one of fail, delay (got "retry")`],
    ['negative restart attempts', { restart: { attempts: -1 } }, `${GROUP}: restart.attempts must be at least 0 (got -1)`],
    ['a zero restart interval', { restart: { interval: '0s' } }, `${GROUP}: restart.interval must be positive`],
    [
      'an unknown restart field',
      { restart: { render_templates: true } },
      `${GROUP}: restart.render_templates is not a known field (known: attempts, interval, delay, mode)`,
    ],
    ['restart given twice', { restart: [{}, {}] }, `${GROUP}: restart may be given once (got 2 blocks)`],
    [
      'a bad restart delay',
      { restart: { delay: '5 seconds' } },
      `${GROUP}: restart.delay: cannot parse duration "5 seconds"; use a number with a unit, like "250ms", "30s", "1m" or "24h"`,
    ],
  ])('rejects a group with %s', (_name, group, message) => {
    expect(errorOf(() => validateJob(job({ group }))).message).toBe(message);
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['type host', { type: 'host' }, `${VOLUME}: type must be one of csi (got "host")`],
    ['no type', { type: undefined }, `${VOLUME}: type is required (one of csi)`],
    ['no source', { source: undefined }, `${VOLUME}: source is required`],
    [
      'a source with a slash',
      { source: 'a/b' },
      `${VOLUME}: source is not usable: volume id "a/b" is not allowed: it may not contain "/", "..", or NUL`,
    ],
    [
      'no access_mode',
      { access_mode: undefined },
      `${VOLUME}: access_mode is required (one of single-node-writer, single-node-reader-only, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer, single-node-single-writer, single-node-multi-writer)`,
    ],
    [
      'a bad access_mode',
      { access_mode: 'rw' },
      `${VOLUME}: access_mode must be one of single-node-writer, single-node-reader-only, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer, single-node-single-writer, single-node-multi-writer (got "rw")`,
    ],
    ['a bad attachment_mode', { attachment_mode: 'fs' }, `${VOLUME}: attachment_mode must be one of file-system, block-device (got "fs")`],
    ['read_only as a string', { read_only: 'yes' }, `${VOLUME}: read_only must be true or false (got "yes")`],
    [
      'a reader-only mode without read_only',
      { access_mode: 'single-node-reader-only' },
      `${VOLUME}: read_only must be true for access_mode single-node-reader-only`,
    ],
    [
      'mount_options on a block device',
      { attachment_mode: 'block-device', mount_options: { fs_type: 'ext4' } },
      `${VOLUME}: mount_options cannot be set with attachment_mode block-device`,
    ],
    [
      'an unknown mount option',
      { mount_options: { flags: [] } },
      `${VOLUME}: mount_options.flags is not a known field (known: fs_type, mount_flags)`,
    ],
    [
      'mount_flags not strings',
      { mount_options: { mount_flags: ['ro', 1] } },
      `${VOLUME}: mount_options.mount_flags[1] must be a string (got 1)`,
    ],
    [
      'an unknown volume field',
      { sticky: true },
      `${VOLUME}: sticky is not a known field (known: type, source, access_mode, attachment_mode, read_only, mount_options, on_stale_mount, per_alloc)`,
    ],
    [
      'a bad on_stale_mount',
      { on_stale_mount: 'ignore' },
      `${VOLUME}: on_stale_mount must be one of remount, restart, keep (got "ignore")`,
    ],
  ])('rejects a volume with %s', (_name, volume, message) => {
    expect(errorOf(() => validateJob(job({ volume }))).message).toBe(message);
  });

  it('reads on_stale_mount (absent: left to the reconciler, which remounts) and writes it back', () => {
    const spec = validateJob(job({ volume: { on_stale_mount: 'restart' } }));
    expect(spec.groups[0]!.volumes[0]!.onStaleMount).toBe('restart');
    expect(validateJob(job({})).groups[0]!.volumes[0]).not.toHaveProperty('onStaleMount');
    expect(validateJob(jobToDocument(spec)).groups[0]!.volumes[0]!.onStaleMount).toBe('restart');
  });

  it('rejects a volume name that is not path-safe', () => {
    const raw = job({ volume: null, group: { volume: { '..': { type: 'csi', source: 's', access_mode: 'single-node-writer' } } } });
    expect(errorOf(() => validateJob(raw)).message).toBe(`${GROUP}: volume name ".." is not allowed: it may not contain "/", "..", or NUL`);
  });

  it.each<[string, Record<string, unknown>, string]>([
    ['no driver', { driver: undefined }, `${TASK}: driver is required (exec, raw_exec, docker or podman)`],
    ['driver fortran', { driver: 'fortran' }, `${TASK}: driver must be one of exec, raw_exec, docker, podman (got "fortran")`],
    ['no config', { config: undefined }, `${TASK}: config is required: config { command = "…" }`],
    ['no command', { config: { args: ['x'] } }, `${TASK}: config.command is required`],
    ['an empty command', { config: { command: '' } }, `${TASK}: config.command is required`],
    ['a numeric command', { config: { command: 7 } }, `${TASK}: config.command must be a string (got 7)`],
    ['args not a list', { config: { command: 'x', args: 'a b' } }, `${TASK}: config.args must be a list of strings (got "a b")`],
    ['a numeric arg', { config: { command: 'x', args: ['a', 2] } }, `${TASK}: config.args[1] must be a string (got 2)`],
    [
      'an unknown config key',
      { config: { command: 'x', workdir: 'y' } },
      `${TASK}: config.workdir is not a known field (known: command, args, cap_add, cap_drop, network_mode)`,
    ],
    ['a numeric env value', { env: { PORT: 80 } }, `${TASK}: env.PORT must be a string (got 80); quote it`],
    ['env not a block', { env: 'A=b' }, `${TASK}: env must be a block (got "A=b")`],
    [
      'an unknown task field',
      { group: 'x' },
      `${TASK}: group is not a known field (known: driver, config, env, user, csi_plugin, volume_mount, restart, kill_signal, kill_timeout, resources, logs, template)`,
    ],
    ['a user that is no user name', { user: 'a b' }, `${TASK}: user "a b" is not a user name (like "nobody" or "www-data") or uid`],
    [
      'a user for a host process',
      { driver: 'raw_exec', user: 'nobody' },
      `${TASK}: user is for driver = "exec", "docker" or "podman" (an isolated task); a raw_exec task runs as the agent's own user`,
    ],
    ['an unknown resources field', { resources: { disk: 100 } }, `${TASK}: resources.disk is not a known field (known: cpu, memory)`],
    [
      'a memory limit too small to run anything',
      { resources: { memory: 1 } },
      `${TASK}: resources.memory must be between 4 and 16777216 (got 1)`,
    ],
    [
      'an unknown kill signal',
      { kill_signal: 'SIGFOO' },
      `${TASK}: kill_signal must be a signal name like SIGTERM or SIGINT (got "SIGFOO")`,
    ],
    [
      'a kill signal without SIG',
      { kill_signal: 'TERM' },
      `${TASK}: kill_signal must be a signal name like SIGTERM or SIGINT (got "TERM")`,
    ],
    [
      'a bad kill timeout',
      { kill_timeout: '5 seconds' },
      `${TASK}: kill_timeout: cannot parse duration "5 seconds"; use a number with a unit, like "250ms", "30s", "1m" or "24h"`,
    ],
    ['a negative kill timeout', { kill_timeout: -1 }, `${TASK}: kill_timeout: -1 is not a non-negative duration`],
    ['a kill timeout of the wrong type', { kill_timeout: true }, `${TASK}: kill_timeout must be a duration like "30s" (got true)`],
    ['a bad task restart', { restart: { attempts: 'two' } }, `${TASK}: restart.attempts must be a whole number (got "two")`],
    ['a logs block keeping no file', { logs: { max_files: 0 } }, `${TASK}: logs.max_files must be between 1 and 1000 (got 0)`],
    [
      'a logs block with a fractional size',
      { logs: { max_file_size: 1.5 } },
      `${TASK}: logs.max_file_size must be a whole number (got 1.5)`,
    ],
    [
      'a volume_mount of an unknown volume',
      { volume_mount: { volume: 'logs', destination: 'l' } },
      `${TASK}: volume_mount.volume names "logs", which is not a volume of the group (volumes: data)`,
    ],
    ['a volume_mount without volume', { volume_mount: { destination: 'l' } }, `${TASK}: volume_mount.volume is required`],
    ['a volume_mount without destination', { volume_mount: { volume: 'data' } }, `${TASK}: volume_mount.destination is required`],
    [
      'a destination with ..',
      { volume_mount: { volume: 'data', destination: '../up' } },
      `${TASK}: volume_mount.destination "../up" may not contain ".."`,
    ],
    [
      'a destination of /',
      { volume_mount: { volume: 'data', destination: '/' } },
      `${TASK}: volume_mount.destination "/" must name a path inside the task dir`,
    ],
    [
      'two mounts on one destination',
      {
        volume_mount: [
          { volume: 'data', destination: 'd' },
          { volume: 'data', destination: './d/' },
        ],
      },
      `${TASK}: volume_mount[1].destination "d" is already used by another volume_mount of this task`,
    ],
    [
      'an unknown volume_mount field',
      { volume_mount: [{ volume: 'data', destination: 'd', selinux_label: 'x' }] },
      `${TASK}: volume_mount.selinux_label is not a known field (known: volume, destination, read_only, propagation_mode)`,
    ],
    [
      'an unknown propagation_mode',
      { volume_mount: [{ volume: 'data', destination: 'd', propagation_mode: 'x' }] },
      `${TASK}: volume_mount.propagation_mode must be one of private, host-to-task, bidirectional (got "x")`,
    ],
    [
      'propagation_mode for a raw_exec task',
      { driver: 'raw_exec', volume_mount: [{ volume: 'data', destination: 'd', propagation_mode: 'host-to-task' }] },
      `${TASK}: volume_mount.propagation_mode is for driver = "exec", "docker" or "podman" (a bind mount into an isolated task); a raw_exec task sees the host path itself`,
    ],
    [
      'cap_add for a raw_exec task',
      { driver: 'raw_exec', config: { command: 'x', cap_add: ['net_admin'] } },
      `${TASK}: config.cap_add is for driver = "exec", "docker" or "podman" (an isolated task); a raw_exec task runs with the agent's own privileges`,
    ],
    [
      'network_mode for a raw_exec task',
      { driver: 'raw_exec', config: { command: 'x', network_mode: 'host' } },
      `${TASK}: config.network_mode is for driver = "exec", "docker" or "podman" (an isolated task); a raw_exec task always uses the host's network`,
    ],
    [
      'an unknown network_mode',
      { config: { command: 'x', network_mode: 'bridge' } },
      `${TASK}: config.network_mode must be one of host, none (got "bridge")`,
    ],
    [
      'an unknown capability',
      { config: { command: 'x', cap_drop: ['chown', 'teleport'] } },
      `${TASK}: config.cap_drop[1] "teleport" is not a Linux capability (like "net_admin" or "CAP_NET_ADMIN")`,
    ],
    ['a volume_mount not a block', { volume_mount: ['data'] }, `${TASK}: volume_mount must be a block (got "data")`],
    [
      'a bad csi_plugin type',
      { csi_plugin: { id: 'p', type: 'both' } },
      `${TASK}: csi_plugin.type must be one of node, controller, monolith (got "both")`,
    ],
    ['a csi_plugin without id', { csi_plugin: { type: 'node' } }, `${TASK}: csi_plugin.id is required`],
    [
      'an unknown csi_plugin field',
      { csi_plugin: { id: 'p', type: 'node', socket: 'x' } },
      `${TASK}: csi_plugin.socket is not a known field (known: id, type, mount_dir, stage_publish_base_dir, health_timeout)`,
    ],
    [
      'csi_plugin given twice',
      {
        csi_plugin: [
          { id: 'p', type: 'node' },
          { id: 'q', type: 'node' },
        ],
      },
      `${TASK}: csi_plugin may be given once (got 2 blocks)`,
    ],
  ])('rejects a task with %s', (_name, task, message) => {
    const err = errorOf(() => validateJob(job({ task })));
    expect(err.message).toBe(message);
  });

  it("reads Nomad's logs block (max_files, max_file_size in MB), a field left out at Nomad's default; without the block the spec says nothing (the driver keeps 10 × 10 MB)", () => {
    expect(validateJob(job({ task: { logs: { max_files: 3 } } })).groups[0]!.tasks[0]!.logs).toEqual({ maxFiles: 3, maxFileSizeMB: 10 });
    expect(validateJob(job({ task: { logs: { max_files: 2, max_file_size: 1 } } })).groups[0]!.tasks[0]!.logs).toEqual({
      maxFiles: 2,
      maxFileSizeMB: 1,
    });
    expect(validateJob(job({})).groups[0]!.tasks[0]!.logs).toBeUndefined();
  });

  it('names the field in ValidationError.field', () => {
    expect(errorOf(() => validateJob(job({ task: { config: {} } }))).field).toBe('config.command');
    expect(errorOf(() => validateJob(job({ group: { count: 0 } }))).field).toBe('count');
    expect(errorOf(() => validateJob(job({ task: { volume_mount: { volume: 'x', destination: 'd' } } }))).field).toBe(
      'volume_mount.volume',
    );
  });

  it('rejects a task name that is not path-safe', () => {
    const raw = { job: { web: { group: { app: { task: { 'a/b': { driver: 'exec', config: { command: 'x' } } } } } } } };
    expect(errorOf(() => validateJob(raw)).message).toBe(`${GROUP}: task name "a/b" is not allowed: it may not contain "/", "..", or NUL`);
  });

  it('treats null as unset', () => {
    const spec = validateJob(job({ group: { count: null }, task: { kill_signal: null, env: null } }));
    expect(spec.groups[0]!.count).toBe(1);
    expect(spec.groups[0]!.tasks[0]!.killSignal).toBe('SIGTERM');
  });

  describe('update blocks', () => {
    const withUpdate = (jobUpdate: Record<string, unknown> | undefined, groupUpdate: Record<string, unknown> | undefined) => {
      const raw = job(groupUpdate ? { group: { update: groupUpdate } } : {}) as { job: { web: Record<string, unknown> } };
      if (jobUpdate) raw.job.web.update = jobUpdate;
      return raw;
    };

    it("fills Nomad's defaults into every group", () => {
      expect(validateJob(job()).groups[0]!.update).toEqual(DEFAULT_UPDATE);
      expect(DEFAULT_UPDATE).toEqual({ maxParallel: 1, minHealthyTime: 10_000, healthyDeadline: 300_000, autoRevert: false });
    });

    it("takes the job's block as each group's default, field by field", () => {
      const spec = validateJob(
        withUpdate({ max_parallel: 3, auto_revert: true, healthy_deadline: '2m' }, { min_healthy_time: '1s', max_parallel: 2 }),
      );
      expect(spec.groups[0]!.update).toEqual({ maxParallel: 2, minHealthyTime: 1_000, healthyDeadline: 120_000, autoRevert: true });
      expect(validateJob(withUpdate({ auto_revert: true }, undefined)).groups[0]!.update).toEqual({ ...DEFAULT_UPDATE, autoRevert: true });
    });

    it('parses an update block in HCL, and round-trips it through jobToDocument', async () => {
      const hcl = `job "web" {
  update {
    max_parallel = 2
  }
  group "app" {
    update {
      min_healthy_time = "3s"
      healthy_deadline = "30s"
      auto_revert      = true
    }
    task "t" {
      driver = "exec"
      config {
        command = "/bin/true"
      }
    }
  }
}`;
      const spec = await parseJobspec(hcl, 'web.hcl');
      expect(spec.groups[0]!.update).toEqual({ maxParallel: 2, minHealthyTime: 3_000, healthyDeadline: 30_000, autoRevert: true });
      const doc = jobToDocument(spec);
      expect(doc.job.web!.group.app!.update).toEqual({
        max_parallel: 2,
        min_healthy_time: '3s',
        healthy_deadline: '30s',
        auto_revert: true,
      });
      expect(validateJob(doc)).toEqual(spec);
    });

    it('writes the defaults for a group saved before update blocks existed', () => {
      const spec = validateJob(job());
      const { update: _dropped, ...old } = spec.groups[0]!;
      expect(jobToDocument({ ...spec, groups: [old] }).job.web!.group.app!.update).toEqual({
        max_parallel: 1,
        min_healthy_time: '10s',
        healthy_deadline: '5m',
        auto_revert: false,
      });
    });

    it.each<[string, Record<string, unknown> | undefined, Record<string, unknown> | undefined, string]>([
      ['max_parallel 0', undefined, { max_parallel: 0 }, `${GROUP} update: max_parallel must be at least 1 (got 0)`],
      ['max_parallel as a string', undefined, { max_parallel: '2' }, `${GROUP} update: max_parallel must be a whole number (got "2")`],
      [
        'a bad min_healthy_time',
        undefined,
        { min_healthy_time: 'soon' },
        `${GROUP} update: min_healthy_time: cannot parse duration "soon"; use a number with a unit, like "250ms", "30s", "1m" or "24h"`,
      ],
      ['a zero healthy_deadline', undefined, { healthy_deadline: '0s' }, `${GROUP} update: healthy_deadline must be positive (got 0s)`],
      [
        'a deadline no longer than min_healthy_time',
        undefined,
        { min_healthy_time: '1m', healthy_deadline: '30s' },
        `${GROUP} update: healthy_deadline leaves no time to become healthy: healthy_deadline (30s) must be longer than min_healthy_time (1m)`,
      ],
      [
        "a group min_healthy_time past the job's deadline",
        { healthy_deadline: '20s' },
        { min_healthy_time: '20s' },
        `${GROUP} update: min_healthy_time leaves no time to become healthy: healthy_deadline (20s) must be longer than min_healthy_time (20s)`,
      ],
      ['auto_revert as a string', undefined, { auto_revert: 'yes' }, `${GROUP} update: auto_revert must be true or false (got "yes")`],
      [
        'an unsupported field',
        undefined,
        { canary: 1 },
        `${GROUP} update: canary is not a known field (known: max_parallel, min_healthy_time, healthy_deadline, auto_revert)`,
      ],
      ['a bad job-level block', { max_parallel: -1 }, undefined, 'job "web" update: max_parallel must be at least 1 (got -1)'],
      [
        'update given twice',
        undefined,
        [{}, {}] as unknown as Record<string, unknown>,
        `${GROUP}: update may be given once (got 2 blocks)`,
      ],
    ])('rejects %s', (_name, jobUpdate, groupUpdate, message) => {
      expect(errorOf(() => validateJob(withUpdate(jobUpdate, groupUpdate))).message).toBe(message);
    });
  });
});

describe('every problem in one pass', () => {
  const BAD = `job "web" {
  # Nomad's, not csiplug's
  region = "eu"

  group "app" {
    count = 0

    volume "data" {
      type   = "csi"
      source = "a/b"
    }

    task "server" {
      driver = "exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "echo \${NOMAD_ALLOC_ID} }"]
      }

      env = {
        B-1 = "x"
        A   = 1
      }

      volume_mount {
        volume      = "data"
        destination = "../up"
      }

      kill_signal = "SIGFOO"
    }
  }
}
`;

  it('lists every problem, each with its place, in the order the file has them', async () => {
    const err = await asyncErrorOf(parseJobspec(BAD, 'web.hcl'));
    expect(err).toBeInstanceOf(ValidationProblems);
    const lines = [
      'web.hcl: job "web": region is not supported: csiplug runs every job on this one node, so there is nothing to choose; remove it',
      `web.hcl: ${GROUP}: count must be at least 1 (got 0)`,
      `web.hcl: ${VOLUME}: source is not usable: volume id "a/b" is not allowed: it may not contain "/", "..", or NUL`,
      `web.hcl: ${VOLUME}: access_mode is required (one of single-node-writer, single-node-reader-only, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer, single-node-single-writer, single-node-multi-writer)`,
      `web.hcl: ${TASK}: env "B-1" is not a name an isolated (exec, docker or podman) task can be given: letters, digits and _, not starting with a digit`,
      `web.hcl: ${TASK}: env.A must be a string (got 1); quote it`,
      `web.hcl: ${TASK}: volume_mount.destination "../up" may not contain ".."`,
      `web.hcl: ${TASK}: kill_signal must be a signal name like SIGTERM or SIGINT (got "SIGFOO")`,
    ];
    expect(err.message).toBe(lines.join('\n'));
    expect((err as ValidationProblems).problems.map((p) => p.message)).toEqual(lines);
    expect(err.field).toBe('region');
    // The same document as JSON, its keys in another order: the problems follow that order.
    const json = {
      job: {
        web: {
          group: { app: { task: { server: { kill_signal: 'SIGFOO', driver: 'exec', config: { command: 'x' } } }, count: 0 } },
          region: 'eu',
        },
      },
    };
    expect(errorOf(() => validateJob(json)).message).toBe(
      [
        `${TASK}: kill_signal must be a signal name like SIGTERM or SIGINT (got "SIGFOO")`,
        `${GROUP}: count must be at least 1 (got 0)`,
        lines[0]!.replace('web.hcl: ', ''),
      ].join('\n'),
    );
  });

  it('reports one problem alone as the ValidationError it always was', () => {
    const err = errorOf(() => validateJob(job({ group: { count: 0 } })));
    expect(err).not.toBeInstanceOf(ValidationProblems);
    expect(err.message).toBe(`${GROUP}: count must be at least 1 (got 0)`);
  });

  it('does not report what follows from a problem already reported', () => {
    // A missing source is not also an unusable id; a broken volume is still a volume of the group; a group whose only task is broken still has a task.
    expect(
      errorOf(() =>
        validateJob(
          job({ volume: { source: undefined, access_mode: 'rw' }, task: { volume_mount: { volume: 'data', destination: 'd' } } }),
        ),
      ).message,
    ).toBe(
      [
        `${VOLUME}: source is required`,
        `${VOLUME}: access_mode must be one of single-node-writer, single-node-reader-only, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer, single-node-single-writer, single-node-multi-writer (got "rw")`,
      ].join('\n'),
    );
    expect(errorOf(() => validateJob(job({ task: { config: 'x' } }))).message).toBe(`${TASK}: config must be a block (got "x")`);
    expect(errorOf(() => validateJob(job({ group: { update: { healthy_deadline: '0s' } } }))).message).toBe(
      `${GROUP} update: healthy_deadline must be positive (got 0s)`,
    );
    // Driver-only checks wait for a driver: none is guessed.
    expect(
      errorOf(() => validateJob(job({ task: { driver: 'java', config: { command: 'x', cap_add: ['net_admin'] }, env: { 'A-B': 'x' } } })))
        .message,
    ).toMatch(/^[^\n]*driver "java" is not supported[^\n]*$/);
  });

  it('lists every bad item of a list or map, not just the first', () => {
    expect(
      errorOf(() => validateJob(job({ task: { config: { command: 'x', args: [1, 'a', true] }, env: { A: 1, B: 'b', C: false } } })))
        .message,
    ).toBe(
      [
        `${TASK}: config.args[0] must be a string (got 1)`,
        `${TASK}: config.args[2] must be a string (got true)`,
        `${TASK}: env.A must be a string (got 1); quote it`,
        `${TASK}: env.C must be a string (got false); quote it`,
      ].join('\n'),
    );
  });

  it.each<[string, Record<string, unknown>, string]>([
    [
      'a datacenter that is no name',
      { job: { datacenters: ['dc1', 'eu west'] } },
      'job "web": datacenters[1] "eu west" is not a datacenter name (letters, digits, "_", "-", "." and "*" wildcards)',
    ],
    [
      'region',
      { job: { region: 'global' } },
      'job "web": region is not supported: csiplug runs every job on this one node, so there is nothing to choose; remove it',
    ],
    [
      'a system job of count 2',
      { job: { type: 'system' }, group: { count: 2 } },
      `${GROUP}: count is 2: a system job runs one alloc of each group on every node it can, so count must be 1 (or left out)`,
    ],
    [
      'type batch',
      { job: { type: 'batch' } },
      'job "web": type "batch" is not supported: csiplug runs service jobs only (long-running tasks, restarted when they exit; see the restart block)',
    ],
    [
      'another type',
      { job: { type: 'daemon' } },
      'job "web": type "daemon" must be "service" or "system", the kinds of job csiplug runs (or leave type out: service)',
    ],
    [
      'job constraint',
      { job: { constraint: { attribute: '${attr.kernel.name}', value: 'linux' } } },
      'job "web": constraint is not supported: csiplug runs everything on this one node: there is no placement to constrain; remove it',
    ],
    [
      'job vault',
      { job: { vault: { policies: ['x'] } } },
      'job "web": vault is not supported: csiplug has no Vault integration: give the task its secrets in env, or let the command fetch them; remove it',
    ],
    [
      'network',
      { group: { network: { port: { http: {} } } } },
      `${GROUP}: network is not supported: csiplug assigns no ports or networks: a raw_exec task uses the host's network, an exec task the host's (config { network_mode = "host" }) or only a loopback of its own (network_mode = "none"); remove it`,
    ],
    [
      'a group service',
      { group: { service: { name: 'web' } } },
      `${GROUP}: service is not supported: csiplug registers no services (no Consul or Nomad service discovery); a CSI plugin is registered by its task's csi_plugin block; remove it`,
    ],
    [
      'affinity',
      { group: { affinity: { attribute: 'x' } } },
      `${GROUP}: affinity is not supported: csiplug runs everything on this one node: there is no placement to constrain; remove it`,
    ],
    [
      'spread',
      { group: { spread: { attribute: 'x' } } },
      `${GROUP}: spread is not supported: csiplug runs everything on this one node: there is no placement to constrain; remove it`,
    ],
    ['group consul', { group: { consul: {} } }, `${GROUP}: consul is not supported: csiplug has no Consul integration; remove it`],
    [
      'driver java',
      { task: { driver: 'java' } },
      `${TASK}: driver "java" is not supported: csiplug runs driver = "exec" (a process isolated on runc), "raw_exec" (a host process), and "docker" or "podman" (an OCI image on runc)`,
    ],
    [
      'an image for an exec task',
      { task: { config: { command: 'x', image: 'nginx' } } },
      `${TASK}: config.image is not supported: images run with driver = "docker" (or "podman"); an exec or raw_exec task runs config { command = "…" args = […] } from this node`,
    ],
    [
      'artifact',
      { task: { artifact: { source: 'https://x' } } },
      `${TASK}: artifact is not supported: csiplug downloads nothing: put the program on this node and name it in config { command = "…" }; remove it`,
    ],
    [
      'a task service',
      { task: { service: { name: 'web' } } },
      `${TASK}: service is not supported: csiplug registers no services (no Consul or Nomad service discovery); a CSI plugin is registered by its task's csi_plugin block; remove it`,
    ],
    [
      'task vault',
      { task: { vault: {} } },
      `${TASK}: vault is not supported: csiplug has no Vault integration: give the task its secrets in env, or let the command fetch them; remove it`,
    ],
    [
      'lifecycle',
      { task: { lifecycle: { hook: 'prestart' } } },
      `${TASK}: lifecycle is not supported: the tasks of a group all start together: prestart, poststart and sidecar tasks are not supported; remove it`,
    ],
  ])("says what to use instead of Nomad's %s", (_name, patch, message) => {
    const raw = job({ group: patch.group as Record<string, unknown>, task: patch.task as Record<string, unknown> }) as {
      job: { web: Record<string, unknown> };
    };
    Object.assign(raw.job.web, patch.job ?? {});
    expect(errorOf(() => validateJob(raw)).message).toBe(message);
  });

  it('takes type = "service", what csiplug runs anyway', () => {
    const raw = job() as { job: { web: Record<string, unknown> } };
    raw.job.web.type = 'service';
    expect(validateJob(raw)).toEqual(validateJob(job()));
  });
});

describe('inSourceOrder', () => {
  const HCL = `# a comment with job "x" { in it
job "web" {
  update {
    max_parallel = 1
  }
  group "b" {
    task "z" {
      env = {
        ZED   = "1"
        ALPHA = "\${NOMAD_TASK_NAME} } {"
      }
      config = { command = "x", args = ["a, b", "}"] }
      driver = "raw_exec"
      /* block comment } */
      kill_signal = <<EOT
SIGINT } {
EOT
    }
    task "a" {
      driver = "exec"
      config {
        command = "x"
      }
    }
  }
  group "a" {
    task "t" {
      driver = "exec"
      config {
        command = "x"
      }
    }
  }
}
`;

  it('keeps the order of the file for keys and labels, and every value as it was', async () => {
    const raw: Record<string, unknown> = await hcl2jsonParse('x.hcl', HCL);
    const ordered = inSourceOrder(raw, HCL);
    expect(ordered).toEqual(raw);
    const web = (ordered.job as Record<string, Record<string, unknown>[]>).web![0]!;
    expect(Object.keys(web)).toEqual(['update', 'group']);
    const groups = web.group as Record<string, Record<string, Record<string, unknown[]>>[]>;
    expect(Object.keys(groups)).toEqual(['b', 'a']);
    expect(Object.keys(groups.b![0]!.task!)).toEqual(['z', 'a']);
    const z = (groups.b![0]!.task!.z as Record<string, unknown>[])[0]!;
    expect(Object.keys(z)).toEqual(['env', 'config', 'driver', 'kill_signal']);
    expect(Object.keys(z.env as object)).toEqual(['ZED', 'ALPHA']);
    expect(Object.keys(z.config as object)).toEqual(['command', 'args']);
  });

  it("leaves data it cannot follow in the converter's order", () => {
    const data = { b: 1, a: 2 };
    expect(Object.keys(inSourceOrder(data, 'a = 2\nb = "unterminated\n'))).toEqual(['b', 'a']);
    expect(Object.keys(inSourceOrder(data, 'a = 2\n}\nb = 1\n'))).toEqual(['b', 'a']);
  });
});
