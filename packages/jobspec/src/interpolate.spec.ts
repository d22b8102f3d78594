import { InterpolationError, interpolate, interpolateStrict, interpolateTask, taskVariables, volumeEnvName } from './interpolate';

describe('interpolate', () => {
  const vars = { CSI_ENDPOINT: 'unix:///d/csi.sock', A: 'x', EMPTY: '', LOOP: '${A}' };

  it.each<[string, string]>([
    ['${CSI_ENDPOINT}', 'unix:///d/csi.sock'],
    ['--endpoint=${CSI_ENDPOINT}/x', '--endpoint=unix:///d/csi.sock/x'],
    ['${A}${A}-${ A }', 'xx-x'],
    ['[${EMPTY}]', '[]'],
    ['${UNKNOWN} stays', '${UNKNOWN} stays'],
    ['$${A} is escaped', '${A} is escaped'],
    ['$$${A}', '$${A}'],
    ['$A and $ {A} are not ours', '$A and $ {A} are not ours'],
    ['${LOOP}', '${A}'],
    ['${unclosed', '${unclosed'],
    ['${toString}', '${toString}'],
    ['%{ if x }y%{ endif }', '%{ if x }y%{ endif }'],
  ])('%p → %p', (text, out) => {
    expect(interpolate(text, vars)).toBe(out);
  });
});

describe('interpolateStrict', () => {
  it('replaces known names and escapes as interpolate does, and throws on an unknown one', () => {
    expect(interpolateStrict('${A}/$${B}', { A: 'x' }, 'f')).toBe('x/${B}');
    expect(() => interpolateStrict('a ${B} c', { A: 'x' }, 'volume_mount.destination')).toThrow(
      /^volume_mount\.destination: \$\{B\} has no value here/,
    );
  });
});

describe('volumeEnvName', () => {
  it.each<[string, string]>([
    ['data', 'CSIPLUG_VOLUME_DATA'],
    ['my-vol.1', 'CSIPLUG_VOLUME_MY_VOL_1'],
    ['Already_UP9', 'CSIPLUG_VOLUME_ALREADY_UP9'],
    ['é', 'CSIPLUG_VOLUME__'],
  ])('%p → %p', (name, env) => {
    expect(volumeEnvName(name)).toBe(env);
  });
});

describe('taskVariables and interpolateTask', () => {
  const vars = taskVariables({
    allocId: 'a1',
    allocIndex: 0,
    jobId: 'web',
    groupName: 'app',
    taskName: 'server',
    taskDir: '/data/allocs/a1/server',
    nodeId: 'node-1',
    volumes: { data: '/data/csi/monolith/hostpath/per-alloc/a1/vol-1/rw-file-system-single-node-writer' },
    extra: { CSI_ENDPOINT: 'unix:///s.sock', CSIPLUG_NODE_ID: 'override' },
  });

  it('names every variable', () => {
    expect(vars).toEqual({
      CSIPLUG_ALLOC_ID: 'a1',
      CSIPLUG_ALLOC_INDEX: '0',
      CSIPLUG_JOB_ID: 'web',
      CSIPLUG_GROUP_NAME: 'app',
      CSIPLUG_TASK_NAME: 'server',
      CSIPLUG_TASK_DIR: '/data/allocs/a1/server',
      CSIPLUG_NODE_ID: 'override',
      CSIPLUG_VOLUME_DATA: '/data/csi/monolith/hostpath/per-alloc/a1/vol-1/rw-file-system-single-node-writer',
      CSI_ENDPOINT: 'unix:///s.sock',
      NOMAD_ALLOC_ID: 'a1',
      NOMAD_SHORT_ALLOC_ID: 'a1',
      NOMAD_ALLOC_NAME: 'web.app[0]',
      NOMAD_ALLOC_INDEX: '0',
      NOMAD_NAMESPACE: 'default',
      NOMAD_REGION: 'global',
      NOMAD_DC: 'dc1',
      NOMAD_JOB_ID: 'web',
      NOMAD_JOB_NAME: 'web',
      NOMAD_GROUP_NAME: 'app',
      NOMAD_TASK_NAME: 'server',
    });
  });

  it("sets Nomad's short alloc id (8 characters), the node's datacenter and region", () => {
    const v = taskVariables({
      allocId: '5a1e0b4c-77d2-4b0e-9a51-0c2b8f1d3e44',
      allocIndex: 2,
      jobId: 'csi',
      groupName: 'nodes',
      taskName: 'plugin',
      taskDir: '/t',
      nodeId: 'n',
      node: { datacenter: 'eu-west', region: 'eu' },
    });
    expect(v).toMatchObject({
      NOMAD_SHORT_ALLOC_ID: '5a1e0b4c',
      NOMAD_ALLOC_NAME: 'csi.nodes[2]',
      NOMAD_DC: 'eu-west',
      NOMAD_REGION: 'eu',
    });
  });

  it("gives Nomad's task dirs with Nomad's meanings when told them, so Nomad jobspecs port unchanged", () => {
    const base = { allocId: 'a2', allocIndex: 1, jobId: 'web', groupName: 'app', taskName: 'server', taskDir: '/local', nodeId: 'node-1' };
    expect(taskVariables({ ...base, nomadDirs: { local: '/local', alloc: '/alloc', secrets: '/secrets' } })).toMatchObject({
      NOMAD_TASK_DIR: '/local',
      NOMAD_ALLOC_DIR: '/alloc',
      NOMAD_SECRETS_DIR: '/secrets',
      NOMAD_ALLOC_INDEX: '1',
    });
    expect(
      interpolate(
        '${NOMAD_ALLOC_DIR}/shared',
        taskVariables({ ...base, nomadDirs: { local: '/d/a2/server/local', alloc: '/d/a2/alloc', secrets: '/d/a2/server/secrets' } }),
      ),
    ).toBe('/d/a2/alloc/shared');
  });

  it('gives a plugin task its plugin data dir, and only a plugin task', () => {
    const base = {
      allocId: 'a2',
      allocIndex: 1,
      jobId: 'plugin',
      groupName: 'p',
      taskName: 'plugin',
      taskDir: '/data/allocs/a2/plugin',
      nodeId: 'node-1',
    };
    expect(taskVariables({ ...base, pluginDataDir: '/data/plugin-data/hostpath' }).CSIPLUG_PLUGIN_DATA_DIR).toBe(
      '/data/plugin-data/hostpath',
    );
    expect(taskVariables(base)).not.toHaveProperty('CSIPLUG_PLUGIN_DATA_DIR');
  });

  it('interpolates env against the variables, then command and args against both', () => {
    const out = interpolateTask(
      {
        config: { command: '${CSIPLUG_TASK_DIR}/bin', args: ['--port', '${PORT}', '--state', '${CSIPLUG_TASK_DIR}/state', '$${HOME}'] },
        env: { PORT: '80${CSIPLUG_ALLOC_INDEX}', DATA: '${CSIPLUG_VOLUME_DATA}' },
      },
      vars,
    );
    expect(out).toEqual({
      command: '/data/allocs/a1/server/bin',
      args: ['--port', '800', '--state', '/data/allocs/a1/server/state', '${HOME}'],
      env: { PORT: '800', DATA: vars.CSIPLUG_VOLUME_DATA },
    });
  });

  it("resolves the node's names for interpolation only: they are not added to the task's env", () => {
    const node = { 'attr.kernel.name': 'linux', 'node.unique.name': 'n7', 'meta.rack': 'r1' };
    const out = interpolateTask(
      {
        config: { command: '/bin/${attr.kernel.name}', args: ['--node=${node.unique.name}', '${RACK}'] },
        env: { RACK: 'rack-${meta.rack}' },
      },
      vars,
      node,
    );
    expect(out).toEqual({ command: '/bin/linux', args: ['--node=n7', 'rack-r1'], env: { RACK: 'rack-r1' } });
  });

  it.each<[string, Partial<{ command: string; args: string[]; env: Record<string, string> }>, RegExp]>([
    [
      'an unknown name in args',
      { args: ['${NOPE}'] },
      /^config\.args\[0\]: \$\{NOPE\} has no value here .*write \$\$\{NOPE\} for a literal/,
    ],
    [
      'meta this node lacks',
      { env: { X: '${meta.rack}' } },
      /^env\.X: \$\{meta\.rack\} has no value on this node: add rack to the agent's client \{ meta \}/,
    ],
    [
      'an attribute the node could not tell',
      { command: '${attr.cpu.arch}/x' },
      /^config\.command: \$\{attr\.cpu\.arch\} has no value on this node: its fingerprint could not tell it on this machine$/,
    ],
    [
      'no address without a default route',
      { args: ['${attr.unique.network.ip-address}'] },
      /^config\.args\[0\]: \$\{attr\.unique\.network\.ip-address\} has no value on this node: it has no default route; name the interface in the agent's client \{ network_interface \}$/,
    ],
  ])('refuses %s, naming the field and the name, never passing it on', (_what, fields, message) => {
    const task = { config: { command: fields.command ?? 'x', args: fields.args ?? [] }, env: fields.env ?? {} };
    expect(() => interpolateTask(task, vars)).toThrow(InterpolationError);
    expect(() => interpolateTask(task, vars)).toThrow(message);
  });
});

describe('interpolateTask of an image task', () => {
  const image = { ref: 'r/p:1', forcePull: false, pullTimeout: 1, mounts: [] };

  it('interpolates the entrypoint and work_dir as it does command and args (the task env included)', () => {
    const out = interpolateTask(
      {
        config: { command: '', args: [] },
        env: { MODE: 'node' },
        image: { ...image, entrypoint: ['/bin/p', '--${MODE}'], workDir: '/w/${NOMAD_TASK_NAME}' },
      },
      { NOMAD_TASK_NAME: 't' },
    );
    expect(out.entrypoint).toEqual(['/bin/p', '--node']);
    expect(out.workDir).toBe('/w/t');
  });

  it('refuses a name with no value in them, naming the field', () => {
    expect(() => interpolateTask({ config: { command: '', args: [] }, env: {}, image: { ...image, workDir: '/${nope}' } }, {})).toThrow(
      /config\.work_dir: \$\{nope\}/,
    );
  });
});
