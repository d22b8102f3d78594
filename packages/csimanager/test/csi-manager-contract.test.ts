// The plugin-wait part of the CSIManager contract (@csiplug/csimanager/
// testing) against FakeCSIManager and against DefaultCSIManager over the
// real plugin registry and in-memory client state (with the fake CSI client
// answering the fingerprints), so the tests that wait on the fake wait the
// way the agent does.
import { DefaultTimeoutPolicy } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { GrpcStatus } from '@csiplug/csi';
import { csiError } from '@csiplug/csi/testing';
import { describeCSIManagerPluginWaitContract, FakeCSIManager } from '../src/testing';
import { Harness } from './harness';

describeCSIManagerPluginWaitContract('FakeCSIManager', async () => {
  const clock = new FakeClock();
  const timeouts = new DefaultTimeoutPolicy();
  const manager = new FakeCSIManager({ clock, timeouts });
  await manager.start();
  return {
    manager,
    clock,
    timeouts,
    bringUp: async (type, name, allocId) => {
      manager.bringUp(name, type, allocId ? { allocId, socketPath: `/fake/plugins/${allocId}/csi.sock` } : {});
    },
    crash: async (type, name) => manager.crash(name, type),
    recover: async (type, name) => {
      manager.bringUp(name, type, {
        allocId: manager.pluginInfo(type, name)!.allocId,
        socketPath: manager.pluginInfo(type, name)!.socketPath,
      });
    },
    settle: () => clock.advance(0),
    cleanup: () => manager.dispose(),
  };
});

describeCSIManagerPluginWaitContract('DefaultCSIManager', async () => {
  const h = new Harness();
  await h.manager.start();
  return {
    get manager() {
      return h.manager;
    },
    clock: h.clock,
    timeouts: h.policy,
    bringUp: async (type, name, allocId = `alloc-${type}-${name}`) => {
      h.registry.register({ type, name, version: 'v1', allocId, socketPath: `/var/data/plugins/${allocId}/csi.sock` });
      await h.settle();
    },
    // The plugin process dies (its socket refuses calls) while its registration stays; the manager's next round sees it.
    crash: async (type, name) => {
      h.behaviour({ socketPath: h.manager.pluginInfo(type, name)!.socketPath }).failures.set(
        'Probe',
        csiError(GrpcStatus.UNAVAILABLE, 'Probe', 'connection refused'),
      );
      await h.manager.fingerprintAll();
      await h.settle();
    },
    recover: async (type, name) => {
      h.behaviour({ socketPath: h.manager.pluginInfo(type, name)!.socketPath }).failures.delete('Probe');
      await h.manager.fingerprintAll();
      await h.settle();
    },
    settle: () => h.settle(),
    cleanup: () => h.dispose(),
  };
});
