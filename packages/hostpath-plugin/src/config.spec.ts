import { ValidationError } from '@csiplug/core';
import { TOPOLOGY_KEY, parseConfig, parseTopology } from './config';

describe('parseConfig', () => {
  it('reads flags, with defaults', () => {
    const c = parseConfig(['--endpoint', 'unix:///tmp/x.sock', '--node-id', 'n1', '--state-dir=/var/lib/hp'], {});
    expect(c).toMatchObject({
      endpoint: 'unix:///tmp/x.sock',
      nodeId: 'n1',
      stateDir: '/var/lib/hp',
      mode: 'monolith',
      name: 'hostpath.csiplug.io',
    });
    expect(c.topology).toEqual({ [TOPOLOGY_KEY]: 'n1' });
    expect(c.maxVolumesPerNode).toBe(0);
    expect(c.faults).toEqual({
      startDelayMs: 0,
      probeNotReadyMs: 0,
      hangRpcs: [],
      crashAfter: 0,
      startFault: 'none',
      garbageRpcs: [],
      slowRpcs: [],
      slowMs: 0,
      crashOnRpcs: [],
      abnormalRpcs: [],
      unimplementedRpcs: [],
      controllerPublish: false,
    });
  });

  it('--request-log (or CSIPLUG_HOSTPATH_REQUEST_LOG) names the test-only request log; it is off unless given', () => {
    const base = ['--endpoint', 'unix:///tmp/x.sock', '--node-id', 'n1', '--state-dir', '/s'];
    expect(parseConfig(base, {}).faults).not.toHaveProperty('requestLog');
    expect(parseConfig(base, { CSIPLUG_HOSTPATH_REQUEST_LOG: '' }).faults).not.toHaveProperty('requestLog');
    expect(parseConfig(base, { CSIPLUG_HOSTPATH_REQUEST_LOG: '/tmp/env.jsonl' }).faults.requestLog).toBe('/tmp/env.jsonl');
    expect(
      parseConfig([...base, '--request-log', '/tmp/flag.jsonl'], { CSIPLUG_HOSTPATH_REQUEST_LOG: '/tmp/env.jsonl' }).faults.requestLog,
    ).toBe('/tmp/flag.jsonl');
  });

  it('takes CSI_ENDPOINT and fault switches from the environment; flags win', () => {
    const env = {
      CSI_ENDPOINT: 'unix:///tmp/env.sock',
      CSIPLUG_HOSTPATH_HANG_RPC: 'NodeGetInfo, Probe',
      CSIPLUG_HOSTPATH_CRASH_AFTER: '3',
      CSIPLUG_HOSTPATH_START_DELAY_MS: '10',
      CSIPLUG_HOSTPATH_PROBE_NOT_READY_MS: '20',
    };
    const c = parseConfig(['--node-id', 'n1', '--state-dir', '/s', '--crash-after', '5', '--mode', 'node'], env);
    expect(c.endpoint).toBe('unix:///tmp/env.sock');
    expect(c.mode).toBe('node');
    expect(c.faults).toEqual({
      startDelayMs: 10,
      probeNotReadyMs: 20,
      hangRpcs: ['NodeGetInfo', 'Probe'],
      crashAfter: 5,
      startFault: 'none',
      garbageRpcs: [],
      slowRpcs: [],
      slowMs: 0,
      crashOnRpcs: [],
      abnormalRpcs: [],
      unimplementedRpcs: [],
      controllerPublish: false,
    });
  });

  it('reads the other fault switches from flags and the environment', () => {
    const env = {
      CSIPLUG_HOSTPATH_START_FAULT: 'not-grpc',
      CSIPLUG_HOSTPATH_GARBAGE_RPC: 'NodePublishVolume',
      CSIPLUG_HOSTPATH_SLOW_MS: '700',
      CSIPLUG_HOSTPATH_FAULT_FILE: '/run/faults.json',
      CSIPLUG_HOSTPATH_CONTROLLER_PUBLISH: 'true',
    };
    const c = parseConfig(
      [
        '--endpoint',
        'unix:///x',
        '--node-id',
        'n1',
        '--state-dir',
        '/s',
        '--slow-rpc',
        'NodeStageVolume,CreateVolume',
        '--crash-on-rpc=NodeUnstageVolume',
        '--start-fault',
        'no-socket',
        '--abnormal-rpc',
        'NodeGetVolumeStats',
        '--unimplemented-rpc',
        'ListSnapshots',
      ],
      env,
    );
    expect(c.faults).toMatchObject({
      startFault: 'no-socket',
      garbageRpcs: ['NodePublishVolume'],
      slowRpcs: ['NodeStageVolume', 'CreateVolume'],
      slowMs: 700,
      crashOnRpcs: ['NodeUnstageVolume'],
      abnormalRpcs: ['NodeGetVolumeStats'],
      unimplementedRpcs: ['ListSnapshots'],
      faultFile: '/run/faults.json',
      controllerPublish: true,
    });
  });

  it('reads --topology and --max-volumes-per-node from flags and the environment; flags win, an empty variable is unset', () => {
    const base = ['--endpoint', 'unix:///x', '--node-id', 'n1', '--state-dir', '/s'];
    const env = { CSIPLUG_HOSTPATH_TOPOLOGY: 'example.com/zone=env', CSIPLUG_HOSTPATH_MAX_VOLUMES_PER_NODE: '4' };
    expect(parseConfig(base, env)).toMatchObject({ topology: { 'example.com/zone': 'env' }, maxVolumesPerNode: 4 });
    const c = parseConfig([...base, '--topology', ' example.com/zone=z1 , example.com/Rack_2=r.7 ', '--max-volumes-per-node=30'], env);
    expect(c.topology).toEqual({ 'example.com/zone': 'z1', 'example.com/Rack_2': 'r.7' });
    expect(c.maxVolumesPerNode).toBe(30);
    expect(parseConfig(base, { CSIPLUG_HOSTPATH_TOPOLOGY: '', CSIPLUG_HOSTPATH_MAX_VOLUMES_PER_NODE: '' })).toMatchObject({
      topology: { [TOPOLOGY_KEY]: 'n1' },
      maxVolumesPerNode: 0,
    });
    expect(parseTopology('zone=a,rack=b')).toEqual({ zone: 'a', rack: 'b' });
  });

  it.each([
    ['', /at least one key=value/],
    ['zone', /"zone" is not key=value/],
    ['=a', /"=a" is not key=value/],
    ['zone=', /value "" of key "zone"/],
    ['zone=a b', /value "a b"/],
    ['zone=-a', /value "-a"/],
    [`zone=${'v'.repeat(64)}`, /value/],
    ['Example.com/zone=a', /prefix "Example.com"/],
    ['example..com/zone=a', /prefix "example..com"/],
    ['/zone=a', /prefix ""/],
    ['example.com/_zone=a', /name "_zone"/],
    ['a/b/c=x', /name "b\/c"/],
    ['zone=a,ZONE=b', /given twice/],
    ['a.io/zone=a,b.io/rack=b', /same prefix/],
    ['a.io/zone=a,rack=b', /same prefix "a.io\/"/],
  ])('refuses --topology %j, naming the flag', (value, why) => {
    const run = () => parseConfig(['--endpoint', 'unix:///x', '--node-id', 'n1', '--state-dir', '/s', '--topology', value], {});
    expect(run).toThrow(ValidationError);
    expect(run).toThrow(/--topology/);
    expect(run).toThrow(why);
  });

  it.each(['-1', '1.5', 'x', '1e3', '99999999999999999999'])('refuses --max-volumes-per-node %j, naming the flag', (value) => {
    expect(() =>
      parseConfig(['--endpoint', 'unix:///x', '--node-id', 'n1', '--state-dir', '/s', '--max-volumes-per-node', value], {}),
    ).toThrow(/--max-volumes-per-node/);
    expect(() =>
      parseConfig(['--endpoint', 'unix:///x', '--node-id', 'n1', '--state-dir', '/s'], { CSIPLUG_HOSTPATH_MAX_VOLUMES_PER_NODE: value }),
    ).toThrow(ValidationError);
  });

  it.each([
    [['--node-id', 'n1', '--state-dir', '/s']],
    [['--endpoint', 'unix:///x', '--state-dir', '/s']],
    [['--endpoint', 'unix:///x', '--node-id', 'n1', '--state-dir', '/s', '--mode', 'both']],
    [['--endpoint', 'unix:///x', '--node-id', '../n', '--state-dir', '/s']],
    [['--endpoint', 'unix:///x', '--node-id', 'n1', '--state-dir', '/s', '--crash-after', '-1']],
    [['--bogus']],
    [['--endpoint', 'unix:///x', '--node-id', 'n1', '--state-dir', '/s', '--hang-rpc', 'NodeStage']],
    [['--endpoint', 'unix:///x', '--node-id', 'n1', '--state-dir', '/s', '--garbage-rpc', 'Probe,Nope']],
    [['--endpoint', 'unix:///x', '--node-id', 'n1', '--state-dir', '/s', '--slow-rpc', 'Probe']],
    [['--endpoint', 'unix:///x', '--node-id', 'n1', '--state-dir', '/s', '--start-fault', 'explode']],
    [['--endpoint', 'unix:///x', '--node-id', 'n1', '--state-dir', '/s', '--controller-publish', 'yes']],
  ])('rejects %j', (argv) => {
    expect(() => parseConfig(argv, {})).toThrow(ValidationError);
  });
});
