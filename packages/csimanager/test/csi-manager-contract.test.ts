// The plugin-wait part of the CSIManager contract (@csiplug/csimanager/
// testing) against FakeCSIManager and against DefaultCSIManager over the
// real plugin registry and in-memory client state (with the fake CSI client
// answering the fingerprints), so the tests that wait on the fake wait the
// way the agent does.
import { DefaultTimeoutPolicy } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
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
    bringUp: async (type, name) => {
      manager.bringUp(name, type);
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
    bringUp: async (type, name) => {
      const allocId = `alloc-${type}-${name}`;
      h.registry.register({ type, name, version: 'v1', allocId, socketPath: `/var/data/plugins/${allocId}/csi.sock` });
      await h.settle();
    },
    settle: () => h.settle(),
    cleanup: () => h.dispose(),
  };
});
