import { ValidationError } from '@csiplug/core';
import { parseConfig } from './config';

describe('parseConfig', () => {
  it('reads flags, with defaults', () => {
    const c = parseConfig(['--endpoint', 'unix:///tmp/x.sock', '--node-id', 'n1', '--state-dir=/var/lib/hp'], {});
    expect(c).toMatchObject({ endpoint: 'unix:///tmp/x.sock', nodeId: 'n1', stateDir: '/var/lib/hp', mode: 'monolith', name: 'hostpath.csiplug.io' });
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
      controllerPublish: false,
    });
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
    const c = parseConfig(['--endpoint', 'unix:///x', '--node-id', 'n1', '--state-dir', '/s', '--slow-rpc', 'NodeStageVolume,CreateVolume', '--crash-on-rpc=NodeUnstageVolume', '--start-fault', 'no-socket'], env);
    expect(c.faults).toMatchObject({
      startFault: 'no-socket',
      garbageRpcs: ['NodePublishVolume'],
      slowRpcs: ['NodeStageVolume', 'CreateVolume'],
      slowMs: 700,
      crashOnRpcs: ['NodeUnstageVolume'],
      faultFile: '/run/faults.json',
      controllerPublish: true,
    });
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
