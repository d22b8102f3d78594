import { ValidationError } from '@csiplug/core';
import { checkTaskInterpolation, interpolationNames } from './interpolation-check';
import { parseJobspec, validateJob } from './jobspec';
import type { TaskSpec } from './model';

const TASK = 'job "web" group "app" task "server"';

/** A job whose one task has `task` on top of a minimal exec task; the group has volumes data and logs. */
function job(task: Record<string, unknown>): unknown {
  const volume = (source: string) => ({ type: 'csi', source, access_mode: 'single-node-writer' });
  return {
    job: {
      web: {
        group: {
          app: {
            volume: { data: volume('vol-1'), logs: volume('vol-2') },
            task: { server: { driver: 'exec', config: { command: '/bin/true' }, ...task } },
          },
        },
      },
    },
  };
}

function problemsOf(task: Record<string, unknown>): string[] {
  try {
    validateJob(job(task));
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as ValidationError).message
      .split('\n')
      .filter((l) => l.includes('uses ${') || l.includes('"${"') || l.includes('not interpolated'));
  }
  return [];
}

describe('interpolationNames', () => {
  it.each<[string, string[], boolean]>([
    ['plain', [], false],
    ['${A} and ${ b.c }', ['A', 'b.c'], false],
    ['$${A} is an escape', [], false],
    ['$$${A} (an escape, then "A}")', [], false],
    ['${open', [], true],
    ['${A}${', ['A'], true],
  ])('%p → %p (unclosed: %p)', (text, names, unclosed) => {
    expect(interpolationNames(text)).toEqual({ names, unclosed });
  });
});

describe('checkTaskInterpolation, through validateJob', () => {
  it.each<[string, Record<string, unknown>]>([
    [
      'Nomad task variables',
      {
        config: {
          command: '${NOMAD_TASK_DIR}/run',
          args: [
            '${NOMAD_SHORT_ALLOC_ID}',
            '${NOMAD_ALLOC_NAME}',
            '${NOMAD_DC}',
            '${NOMAD_REGION}',
            '${NOMAD_NAMESPACE}',
            '${NOMAD_JOB_NAME}',
          ],
        },
      },
    ],
    [
      'node attributes and fields',
      {
        env: {
          A: '${attr.unique.hostname}/${attr.unique.network.ip-address}/${attr.cpu.arch}/${attr.kernel.name}/${attr.os.name}',
          N: '${node.unique.id}-${node.unique.name}-${node.datacenter}-${node.region}-${node.class}',
        },
      },
    ],
    ['any meta key', { env: { RACK: '${meta.rack}', Z: '${ meta.zone-a }' } }],
    ["the task's own env names in args", { config: { command: '/bin/x', args: ['--port=${PORT}'] }, env: { PORT: '80' } }],
    [
      'a volume the task mounts, as CSIPLUG_VOLUME_<NAME>',
      { config: { command: '/bin/x', args: ['${CSIPLUG_VOLUME_DATA}'] }, volume_mount: { volume: 'data', destination: '/srv' } },
    ],
    ['an escape and a shell variable', { config: { command: '/bin/sh', args: ['-c', 'echo $${HOME} $HOME'] } }],
    [
      'Nomad dirs and node names in a destination',
      {
        volume_mount: [
          { volume: 'data', destination: '${NOMAD_ALLOC_DIR}/data' },
          { volume: 'logs', destination: '/logs/${node.unique.name}' },
        ],
      },
    ],
  ])('accepts %s', (_what, task) => {
    expect(() => validateJob(job(task))).not.toThrow();
  });

  it.each<[string, Record<string, unknown>, string]>([
    [
      'an unknown variable in args',
      { config: { command: '/bin/x', args: ['a', '${PORT}'] } },
      `${TASK}: config.args[1] uses \${PORT}: csiplug has no value for it here`,
    ],
    [
      'an unknown variable in the command',
      { config: { command: '${BIN}/x' } },
      `${TASK}: config.command uses \${BIN}: csiplug has no value for it here`,
    ],
    [
      'a Nomad variable csiplug does not set',
      { env: { L: '${NOMAD_MEMORY_LIMIT}' } },
      `${TASK}: env.L uses \${NOMAD_MEMORY_LIMIT}: csiplug has no value for it here (csiplug sets NOMAD_ALLOC_ID,`,
    ],
    [
      'an unknown node attribute',
      { env: { A: '${attr.platform.aws.ami-id}' } },
      `${TASK}: env.A uses \${attr.platform.aws.ami-id}: attr.platform.aws.ami-id is not a node attribute csiplug has (attr.unique.hostname,`,
    ],
    [
      'an unknown node field',
      { env: { A: '${node.pool}' } },
      `${TASK}: env.A uses \${node.pool}: node.pool is not a node field (node.unique.id,`,
    ],
    ['meta without a key', { env: { A: '${meta.}' } }, `${TASK}: env.A uses \${meta.}: "meta." names no meta key`],
    [
      'another env entry in an env value',
      { env: { A: 'x', B: '${A}' } },
      "an env value may use the task variables and the node's names (not the task's other env entries)",
    ],
    [
      'a volume the isolated task does not mount',
      { env: { D: '${CSIPLUG_VOLUME_LOGS}' }, volume_mount: { volume: 'data', destination: '/d' } },
      'it names a group volume this task does not see',
    ],
    [
      'a plugin variable in a task that is no plugin',
      { config: { command: '/bin/x', args: ['${CSI_ENDPOINT}'] } },
      `${TASK}: config.args[0] uses \${CSI_ENDPOINT}`,
    ],
    [
      'an env name in a destination',
      { env: { SUB: 'x' }, volume_mount: { volume: 'data', destination: '/d/${SUB}' } },
      `${TASK}: volume_mount.destination uses \${SUB}: csiplug has no value for it here`,
    ],
    [
      'a volume path in a destination',
      {
        volume_mount: [
          { volume: 'data', destination: '/d' },
          { volume: 'logs', destination: '${CSIPLUG_VOLUME_DATA}/x' },
        ],
      },
      `${TASK}: volume_mount[1].destination uses \${CSIPLUG_VOLUME_DATA}`,
    ],
    [
      'an unclosed ${',
      { env: { A: 'x${NOMAD_ALLOC_ID' } },
      `${TASK}: env.A has a "\${" with no closing "}": write "$\${" for a literal "\${"`,
    ],
    [
      'a ${ in csi_plugin mount_dir',
      { csi_plugin: { id: 'p', type: 'node', mount_dir: '/csi/${NOMAD_ALLOC_ID}' } },
      `${TASK}: csi_plugin.mount_dir is not interpolated (in Nomad neither)`,
    ],
  ])('refuses %s, naming the field and the name', (_what, task, message) => {
    const problems = problemsOf(task);
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.join('\n')).toContain(message);
  });

  it('lists the known prefixes and tells how to write a literal', () => {
    const [problem] = problemsOf({ config: { command: '/bin/x', args: ['${PORT}'] } });
    expect(problem).toContain(
      'Known: NOMAD_* and CSIPLUG_* task variables, attr.<name> (unique.hostname, unique.network.ip-address, kernel.name',
    );
    expect(problem).toContain("node.<field> (unique.id, unique.name, datacenter, region, class), meta.<key> (the agent's client { meta })");
    expect(problem).toContain('Write "$${PORT}" for a literal "${PORT}", or "$PORT" to let a shell read it from the environment');
  });

  it('reports every unknown name of the task in one pass', () => {
    expect(problemsOf({ config: { command: '${A}', args: ['${B}'] }, env: { C: '${D}' } })).toHaveLength(3);
  });

  it("gives a csi_plugin task the supervisor's variables, and a raw_exec task every volume of its group", () => {
    expect(() =>
      validateJob(
        job({
          csi_plugin: { id: 'p', type: 'node' },
          config: { command: '/p', args: ['${CSI_ENDPOINT}', '${CSIPLUG_CSI_MOUNT_DIR}', '${CSIPLUG_PLUGIN_DATA_DIR}'] },
        }),
      ),
    ).not.toThrow();
    expect(() => validateJob(job({ driver: 'raw_exec', env: { D: '${CSIPLUG_VOLUME_LOGS}' } }))).not.toThrow();
  });

  it('reads HCL the same way: ${attr.unique.network.ip-address} is kept as written and accepted, an unknown name refused', async () => {
    const hcl = (arg: string) =>
      `job "web" {\n group "app" {\n task "server" {\n driver = "exec"\n config {\n command = "/bin/x"\n args = ["${arg}"]\n }\n }\n }\n}\n`;
    const ok = await parseJobspec(hcl('--ip=${attr.unique.network.ip-address}'), 'w.hcl');
    expect(ok.groups[0]!.tasks[0]!.config.args).toEqual(['--ip=${attr.unique.network.ip-address}']);
    await expect(parseJobspec(hcl('${attr.unique.hostnam}'), 'w.hcl')).rejects.toThrow(
      'w.hcl: job "web" group "app" task "server": config.args[0] uses ${attr.unique.hostnam}: attr.unique.hostnam is not a node attribute',
    );
  });

  it("checks an image task's fields: a mount target may use the task's dirs, not its env", () => {
    const task: Pick<TaskSpec, 'config' | 'env' | 'volumeMounts' | 'isolated' | 'image'> = {
      config: { command: '', args: [] },
      env: { TAG: 'v1' },
      volumeMounts: [],
      isolated: true,
      image: {
        ref: 'registry.example/plugin:${TAG}',
        forcePull: false,
        pullTimeout: 300_000,
        mounts: [
          { type: 'bind', source: '${NOMAD_TASK_DIR}/conf', target: '/etc/plugin', readOnly: true },
          { type: 'tmpfs', target: '/run/${TAG}', readOnly: false },
        ],
      },
    };
    expect(checkTaskInterpolation(task, [])).toEqual([
      { key: 'config', field: 'config.mount[1].target', message: expect.stringContaining('uses ${TAG}: csiplug has no value for it here') },
    ]);
  });
});
