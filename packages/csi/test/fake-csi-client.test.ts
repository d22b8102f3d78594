// The CSIClient fake: the contract suite (the same tests the real client
// passes against the hostpath plugin, see
// packages/hostpath-plugin/test/csi-client-contract.test.ts), then what
// only the fake does: scripted failures, gates, shared behaviours, probe
// scripts.
import { AbortError } from '@csiplug/core';
import { GrpcStatus, mountCapability } from '../src';
import { FakeCSIClientFactory, FakeMountPoints, csiError, describeCSIClientContract, normalizeMountPath } from '../src/testing';

describeCSIClientContract('FakeCSIClient', async () => {
  const factory = new FakeCSIClientFactory();
  const endpoint = 'unix:///fake/plugin/csi.sock';
  const behaviour = factory.behaviourOf(endpoint);
  behaviour.nodeId = 'contract-node';
  behaviour.volumes = new Set();
  return {
    client: factory.createClient(endpoint),
    nodeId: 'contract-node',
    dir: '/fake/mounts',
    isMounted: async (p) => factory.mounts.has(p),
    cleanup: async () => {
      for (const c of factory.clients) c.dispose();
    },
  };
});

describe('FakeCSIClient beyond the contract', () => {
  const CAP = mountCapability('SINGLE_NODE_WRITER');

  it('records calls and shares one behaviour between the clients of a socket', async () => {
    const factory = new FakeCSIClientFactory();
    const a = factory.createClient('/s/a.sock');
    const b = factory.createClient('/s/a.sock');
    factory.behaviourOf('/s/a.sock').ready = false;
    expect(await a.probe()).toEqual({ ready: false });
    expect(await b.probe()).toEqual({ ready: false });
    expect(await factory.createClient('/s/other.sock').probe()).toEqual({ ready: true });
    expect(factory.behaviourOf('/s/a.sock').callsOf('Probe')).toHaveLength(2);
    expect(factory.clientsOf('/s/a.sock')).toEqual([a, b]);
    expect(factory.totalProbes).toBe(3);
  });

  it('fails a method every time, or the next calls once each', async () => {
    const factory = new FakeCSIClientFactory();
    const client = factory.createClient('/s.sock');
    const b = factory.behaviourOf('/s.sock');
    b.failNext('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'first'));
    b.failNext('Probe', csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'second'));
    await expect(client.probe()).rejects.toThrow(/first/);
    await expect(client.probe()).rejects.toThrow(/second/);
    await expect(client.probe()).resolves.toEqual({ ready: true });
    b.failures.set('NodeGetInfo', csiError(GrpcStatus.INTERNAL, 'NodeGetInfo', 'broken'));
    await expect(client.nodeGetInfo()).rejects.toThrow(/broken/);
    await expect(client.nodeGetInfo()).rejects.toThrow(/broken/);
  });

  it('holds a call at a gate until released, and lets an abort end the wait', async () => {
    const factory = new FakeCSIClientFactory();
    const client = factory.createClient('/s.sock');
    const b = factory.behaviourOf('/s.sock');
    const gate = b.gate('NodeStageVolume');
    let done = false;
    const staged = client.nodeStageVolume({ volumeId: 'v', stagingTargetPath: '/st/v', volumeCapability: CAP }).then(() => (done = true));
    await gate.reached;
    expect(done).toBe(false);
    expect(factory.mounts.has('/st/v')).toBe(false);
    gate.release();
    await staged;
    expect(factory.mounts.has('/st/v')).toBe(true);

    const ac = new AbortController();
    b.gate('NodePublishVolume');
    const publishing = client.nodePublishVolume(
      { volumeId: 'v', stagingTargetPath: '/st/v', targetPath: '/t/v', volumeCapability: CAP },
      { signal: ac.signal },
    );
    ac.abort();
    await expect(publishing).rejects.toBeInstanceOf(AbortError);
    expect(factory.mounts.has('/t/v')).toBe(false);
  });

  it('answers Probe from a factory-wide script when one is set', async () => {
    const factory = new FakeCSIClientFactory();
    const client = factory.createClient('/s.sock');
    let n = 0;
    factory.probe = () => (++n < 2 ? new Error('connect ECONNREFUSED') : { ready: true });
    await expect(client.probe()).rejects.toThrow('ECONNREFUSED');
    await expect(client.probe()).resolves.toEqual({ ready: true });
    factory.probe = undefined;
    factory.behaviourOf('/s.sock').ready = false;
    await expect(client.probe()).resolves.toEqual({ ready: false });
    expect(client.probes).toBe(3);
  });

  it('accepts any volume id by default, as node-only tests expect', async () => {
    const factory = new FakeCSIClientFactory();
    const client = factory.createClient('/s.sock');
    await client.nodeStageVolume({ volumeId: 'never-created', stagingTargetPath: '/st/x', volumeCapability: CAP });
    await client.nodeUnstageVolume({ volumeId: 'never-created', stagingTargetPath: '/st/x' });
    expect(factory.mounts.points.size).toBe(0);
  });

  it('knows a volume from CreateVolume until DeleteVolume once it keeps a volume set', async () => {
    const factory = new FakeCSIClientFactory();
    const client = factory.createClient('/s.sock');
    factory.behaviourOf('/s.sock').volumes = new Set();
    const { volume } = await client.createVolume({ name: 'data', volumeCapabilities: [CAP] });
    await client.nodeStageVolume({ volumeId: volume!.volumeId, stagingTargetPath: '/st/d', volumeCapability: CAP });
    await client.deleteVolume({ volumeId: volume!.volumeId });
    await expect(client.nodeUnstageVolume({ volumeId: volume!.volumeId, stagingTargetPath: '/st/d' })).rejects.toMatchObject({
      grpcCode: GrpcStatus.NOT_FOUND,
    });
    expect(factory.mounts.has('/st/d')).toBe(false);
  });

  it('answers ControllerPublishVolume with the behaviour’s publish context (a copy), or none while it is unset', async () => {
    const factory = new FakeCSIClientFactory();
    const client = factory.createClient('/s.sock');
    const b = factory.behaviourOf('/s.sock');
    const request = { volumeId: 'v', nodeId: 'n', volumeCapability: CAP };
    expect(await client.controllerPublishVolume(request)).toEqual({});
    b.publishContext = { devicePath: '/dev/fake0' };
    const answer = await client.controllerPublishVolume(request);
    expect(answer).toEqual({ publishContext: { devicePath: '/dev/fake0' } });
    answer.publishContext!.devicePath = 'changed by the caller';
    expect(b.publishContext).toEqual({ devicePath: '/dev/fake0' });
    b.publishContext = {};
    expect(await client.controllerPublishVolume(request)).toEqual({ publishContext: {} });
    expect(b.callsOf('ControllerPublishVolume').map((c) => c.request)).toEqual([request, request, request]);
  });

  it('spells a mount path one way, as the kernel lists it', () => {
    const mounts = new FakeMountPoints();
    mounts.mark('/a/b/');
    expect(mounts.has('/a/./b')).toBe(true);
    expect([...mounts.points]).toEqual(['/a/b']);
    expect(normalizeMountPath('/')).toBe('/');
    mounts.unmark('/a//b');
    expect(mounts.points.size).toBe(0);
  });
});
