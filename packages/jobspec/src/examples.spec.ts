// Every file under /examples parses; the JSON workload equals its HCL twin.
import * as fs from 'fs';
import * as path from 'path';
import { parseAgentConfig } from './agent-config';
import { interpolateTask, taskVariables } from './interpolate';
import { parseJobspec } from './jobspec';
import { parseVolumeSpec } from './volume-spec';

const EXAMPLES = path.resolve(__dirname, '../../../examples');
const read = (name: string): string => fs.readFileSync(path.join(EXAMPLES, name), 'utf8');

describe('examples', () => {
  it('agent.hcl', async () => {
    const cfg = await parseAgentConfig(read('agent.hcl'), 'agent.hcl');
    expect(cfg.dataDir).toBe('/var/lib/csiplug');
    expect(cfg.port).toBe(4747);
    expect(cfg.state.backend).toBe('sqlite');
    expect(cfg.heartbeat.strategy).toBe('backoff');
    // The example jobs are raw_exec: the example config enables the driver (off by default).
    expect(cfg.rawExec).toEqual({ enabled: true });
  });

  it('hostpath-plugin.nomad.hcl', async () => {
    const job = await parseJobspec(read('hostpath-plugin.nomad.hcl'), 'hostpath-plugin.nomad.hcl');
    const task = job.groups[0]!.tasks[0]!;
    expect(job.id).toBe('hostpath-plugin');
    expect(task.csiPlugin).toEqual({
      id: 'hostpath',
      type: 'monolith',
      mountDir: '/csi',
      stagePublishBaseDir: '/local/csi',
      healthTimeout: 30_000,
    });
    const vars = taskVariables({
      allocId: 'a1',
      allocIndex: 0,
      jobId: job.id,
      groupName: 'plugin',
      taskName: 'plugin',
      taskDir: '/d/allocs/a1/plugin',
      nodeId: 'node-1',
      pluginDataDir: '/d/plugin-data/hostpath',
      extra: { CSI_ENDPOINT: 'unix:///d/plugins/a1/csi.sock', CSIPLUG_HOSTPATH_CLI: '/x/cli.js' },
    });
    expect(interpolateTask(task, vars)).toEqual({
      command: 'node',
      args: [
        '/x/cli.js',
        '--endpoint',
        'unix:///d/plugins/a1/csi.sock',
        '--node-id',
        'node-1',
        '--state-dir',
        '/d/plugin-data/hostpath/state',
        '--mode',
        'monolith',
      ],
      env: {},
    });
  });

  it('hostpath-plugin-image.nomad.hcl', async () => {
    const parsed = await parseJobspec(read('hostpath-plugin-image.nomad.hcl'), 'hostpath-plugin-image.nomad.hcl');
    const task = parsed.groups[0]!.tasks[0]!;
    expect(parsed.id).toBe('hostpath-plugin-image');
    expect(task.driver).toBe('docker');
    expect(task.isolated).toBe(true);
    // No command: the image's entrypoint runs, with these args.
    expect(task.config.command).toBe('');
    expect(task.image).toMatchObject({ ref: 'registry.example.com:5000/csiplug/hostpath-plugin:0.1.0', privileged: true });
    expect(task.csiPlugin).toMatchObject({ id: 'hostpath', type: 'monolith', mountDir: '/csi', healthTimeout: 30_000 });
    expect(task.config.args).toEqual([
      '--endpoint',
      '${CSI_ENDPOINT}',
      '--node-id',
      '${CSIPLUG_NODE_ID}',
      '--state-dir',
      '${CSIPLUG_PLUGIN_DATA_DIR}/state',
      '--mode',
      'monolith',
    ]);
  });

  it('workload.nomad.hcl and workload.json parse to the same job', async () => {
    const hcl = await parseJobspec(read('workload.nomad.hcl'), 'workload.nomad.hcl');
    const json = await parseJobspec(read('workload.json'), 'workload.json');
    expect(json).toEqual(hcl);
    expect(hcl.groups[0]!.volumes[0]).toMatchObject({ name: 'data', source: 'vol-demo', accessMode: 'single-node-writer' });
    expect(hcl.groups[0]!.tasks[0]!.volumeMounts).toEqual([{ volume: 'data', destination: 'data', readOnly: false }]);
  });

  it('volume.hcl', async () => {
    const spec = await parseVolumeSpec(read('volume.hcl'), 'volume.hcl');
    expect(spec).toMatchObject({ id: 'vol-demo', pluginId: 'hostpath', capacityMin: 10 * 2 ** 20 });
    expect(spec.capabilities).toEqual([{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }]);
  });

  it('covers every example file (embed-agent.js runs in test/composition.test.ts)', () => {
    expect(
      fs
        .readdirSync(EXAMPLES)
        .filter((f) => !f.endsWith('.md') && f !== 'embed-agent.js')
        .sort(),
    ).toEqual([
      'agent.hcl',
      'hostpath-plugin-image.nomad.hcl',
      'hostpath-plugin.nomad.hcl',
      'volume.hcl',
      'workload.json',
      'workload.nomad.hcl',
    ]);
  });
});
