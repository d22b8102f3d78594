// The volume manager's reads and resizes beside the four node steps:
// volumeUsage and volumeCondition (NodeGetVolumeStats: what is asked, which
// capabilities gate it, how the wire's int64 strings become counts) and
// expandVolume (NodeExpandVolume: the request, the capacity it answers), and
// the duration each step records (VOLUME_STEP_SECONDS), over the real CSI
// manager with a fake CSI client, mount table and clock (test/harness.ts).
import * as path from 'node:path';
import { AbortError, type MetricDef, type MetricLabels, type Metrics, ValidationError } from '@csiplug/core';
import { GrpcStatus } from '@csiplug/csi';
import { csiError, notFound } from '@csiplug/csi/testing';
import { Harness, plugin } from '../test/harness';
import { type CSIVolumeRef, type UsageOptions, VOLUME_STEP_SECONDS, type VolumeManager } from '.';

const usage: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };
const vol: CSIVolumeRef = { id: 'vol-1', externalId: 'remote-1', pluginId: 'my-plugin', secrets: { s: 't' } };

interface Observation {
  name: string;
  value: number;
  labels: Record<string, string>;
}

/** Keeps every observation; `count` is not used by the volume manager. */
class RecordingMetrics implements Metrics {
  readonly observed: Observation[] = [];
  count(): void {
    throw new Error('the volume manager counts nothing');
  }
  observe<L extends string>(def: MetricDef<L>, value: number, labels: MetricLabels<L>): void {
    this.observed.push({ name: def.name, value, labels: { ...labels } });
  }
}

describe('volume manager: stats, expansion and step durations', () => {
  let h: Harness;
  let vm: VolumeManager;
  let metrics: RecordingMetrics;
  const reg = plugin(0);
  const b = () => h.behaviour(reg);
  const root = () => path.join(h.dataDir, 'csi', 'node', 'my-plugin');
  const stagingOf = () => path.join(root(), 'staging', 'vol-1', 'rw-file-system-single-node-writer');
  const targetOf = (allocId: string) => path.join(root(), 'per-alloc', allocId, 'vol-1', 'rw-file-system-single-node-writer');
  const calls = (m: string) => b().callsOf(m);
  /** Has the fake plugin offer these node capabilities, seen from the next fingerprint round on. */
  const offer = async (...caps: string[]) => {
    b().answers.set('NodeGetCapabilities', () => ({ capabilities: caps.map((type) => ({ rpc: { type } })) }));
    await h.manager.fingerprintAll();
  };
  const stats = (answer: unknown) => b().answers.set('NodeGetVolumeStats', () => answer);
  const steps = () => metrics.observed.map((o) => `${o.labels.plugin}:${o.labels.step}:${o.labels.result}`);

  beforeEach(async () => {
    metrics = new RecordingMetrics();
    h = new Harness({ metrics });
    h.registry.register(reg);
    await h.manager.start();
    await h.settle();
    vm = h.manager.volumeManager('my-plugin');
  });
  afterEach(async () => {
    await h.dispose();
  });

  describe('volumeUsage', () => {
    it('asks nothing of a plugin without GET_VOLUME_STATS', async () => {
      expect(await vm.volumeUsage(vol, 'alloc-a', usage)).toBeUndefined();
      expect(calls('NodeGetVolumeStats')).toEqual([]);
    });

    it('asks NodeGetVolumeStats at the target (with the staging path) and turns the int64 strings into counts', async () => {
      await offer('STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'VOLUME_CONDITION');
      stats({
        usage: [
          { unit: 'BYTES', total: '1000', used: '0', available: '1000' },
          // Not counts: a negative, a word, infinity; only the number survives.
          { unit: 'INODES', total: 64, used: '-1', available: 'Infinity' },
          { unit: 'UNKNOWN', total: '5', used: '5', available: '0' },
        ],
        volumeCondition: { abnormal: true, message: 'disk gone' },
      });
      expect(await vm.volumeUsage(vol, 'alloc-a', usage)).toStrictEqual({
        bytes: { total: 1000, used: 0, available: 1000 },
        inodes: { total: 64 },
        condition: { abnormal: true, message: 'disk gone' },
      });
      expect(calls('NodeGetVolumeStats').map((c) => c.request)).toEqual([
        { volumeId: 'remote-1', volumePath: targetOf('alloc-a'), stagingTargetPath: stagingOf() },
      ]);
    });

    it('leaves out what the plugin does not offer or answer: staging path, condition, a unit without counts', async () => {
      await offer('GET_VOLUME_STATS');
      stats({ usage: [{ unit: 'BYTES', total: 'many' }], volumeCondition: { abnormal: true, message: 'ignored' } });
      expect(await vm.volumeUsage({ id: 'vol-1', pluginId: 'my-plugin' }, 'alloc-a', usage)).toStrictEqual({ bytes: {} });
      expect(calls('NodeGetVolumeStats').map((c) => c.request)).toEqual([{ volumeId: 'vol-1', volumePath: targetOf('alloc-a') }]);

      await offer('GET_VOLUME_STATS', 'VOLUME_CONDITION');
      stats({ volumeCondition: {} });
      expect(await vm.volumeUsage(vol, 'alloc-a', usage)).toEqual({ condition: { abnormal: false, message: '' } });
      stats({ usage: [], volumeCondition: null });
      expect(await vm.volumeUsage(vol, 'alloc-a', usage)).toEqual({});
    });

    it('answers nothing for a mount made under another mount dir, and asks for one at this dir however it is spelled', async () => {
      await offer('GET_VOLUME_STATS');
      stats({ usage: [] });
      expect(
        await vm.volumeUsage(vol, 'alloc-a', usage, { hostPath: '/old/per-alloc/alloc-a/vol-1/rw-file-system-single-node-writer' }),
      ).toBeUndefined();
      expect(calls('NodeGetVolumeStats')).toHaveLength(0);
      const spelled = path.join(root(), 'per-alloc', 'alloc-a', 'x', '..', 'vol-1', 'rw-file-system-single-node-writer') + '/';
      expect(await vm.volumeUsage(vol, 'alloc-a', usage, { hostPath: spelled })).toEqual({});
      expect(calls('NodeGetVolumeStats')).toHaveLength(1);
    });

    it('passes a plugin error on, and checks its arguments first', async () => {
      await offer('GET_VOLUME_STATS');
      b().failNext('NodeGetVolumeStats', csiError(GrpcStatus.INTERNAL, 'NodeGetVolumeStats', 'stats broke'));
      await expect(vm.volumeUsage(vol, 'alloc-a', usage)).rejects.toThrow(/stats broke/);
      await expect(vm.volumeUsage(vol, '', usage)).rejects.toBeInstanceOf(ValidationError);
      await expect(vm.volumeUsage({ ...vol, pluginId: 'other' }, 'alloc-a', usage)).rejects.toThrow(/belongs to plugin "other"/);
      expect(calls('NodeGetVolumeStats')).toHaveLength(1);
    });
  });

  describe('volumeCondition', () => {
    it('asks at the staging path without an alloc; no staging path for a plugin without STAGE_UNSTAGE_VOLUME', async () => {
      await offer('STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'VOLUME_CONDITION');
      stats({ volumeCondition: { message: 'fine' } });
      expect(await vm.volumeCondition(vol, '', usage, 'staging', { hostPath: stagingOf() })).toEqual({
        abnormal: false,
        message: 'fine',
        reported: true,
      });
      await offer('GET_VOLUME_STATS', 'VOLUME_CONDITION');
      stats({ volumeCondition: { abnormal: true } });
      expect(await vm.volumeCondition(vol, 'alloc-a', usage, 'target', { hostPath: targetOf('alloc-a') })).toEqual({
        abnormal: true,
        message: '',
        reported: true,
      });
      expect(calls('NodeGetVolumeStats').map((c) => c.request)).toEqual([
        { volumeId: 'remote-1', volumePath: stagingOf(), stagingTargetPath: stagingOf() },
        { volumeId: 'remote-1', volumePath: targetOf('alloc-a') },
      ]);
    });

    it('a staging path under another dir, or the target path asked for as staging, is not asked about', async () => {
      await offer('STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'VOLUME_CONDITION');
      expect(await vm.volumeCondition(vol, '', usage, 'staging', { hostPath: targetOf('alloc-a') })).toBeUndefined();
      expect(await vm.volumeCondition(vol, 'alloc-a', usage, 'target', { hostPath: stagingOf() })).toBeUndefined();
      expect(calls('NodeGetVolumeStats')).toEqual([]);
    });

    it('a NOT_FOUND without details is abnormal all the same; a plugin answering no condition reports none', async () => {
      await offer('GET_VOLUME_STATS', 'VOLUME_CONDITION');
      b().failNext('NodeGetVolumeStats', notFound('NodeGetVolumeStats', ''));
      expect(await vm.volumeCondition(vol, 'alloc-a', usage, 'target')).toEqual({
        abnormal: true,
        message: 'NodeGetVolumeStats: NOT_FOUND',
        reported: true,
      });
      stats({ usage: [] });
      expect(await vm.volumeCondition(vol, 'alloc-a', usage, 'target')).toEqual({ abnormal: false, message: '', reported: false });
      await expect(vm.volumeCondition(vol, '', usage, 'target')).rejects.toBeInstanceOf(ValidationError);
    });
  });

  describe('expandVolume', () => {
    it('refuses a capacity that is not a whole number of bytes above 0, before asking anything', async () => {
      await offer('EXPAND_VOLUME');
      for (const bad of [0, -1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 2]) {
        const err = await vm.expandVolume(vol, 'alloc-a', usage, bad).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ValidationError);
        expect(err).toMatchObject({
          message: expect.stringContaining(`a capacity to expand to must be a whole number of bytes above 0, got ${bad}`),
        });
      }
      expect(calls('NodeExpandVolume')).toEqual([]);
      expect(metrics.observed).toEqual([]);
    });

    it('asks nothing of a plugin without EXPAND_VOLUME', async () => {
      expect(await vm.expandVolume(vol, 'alloc-a', usage, 4096)).toBeUndefined();
      expect(calls('NodeExpandVolume')).toEqual([]);
      expect(steps()).toEqual(['my-plugin:expand:ok']);
    });

    it('sends the target, the staging path, the capability, the secrets and the capacity; answers the capacity the plugin reports', async () => {
      await offer('STAGE_UNSTAGE_VOLUME', 'EXPAND_VOLUME');
      b().answers.set('NodeExpandVolume', () => ({ capacityBytes: '8192' }));
      expect(await vm.expandVolume({ ...vol, mountOptions: { fsType: 'xfs' } }, 'alloc-a', usage, 4096)).toBe(8192);
      expect(calls('NodeExpandVolume').map((c) => c.request)).toEqual([
        {
          volumeId: 'remote-1',
          volumePath: targetOf('alloc-a'),
          capacityRange: { requiredBytes: 4096, limitBytes: 0 },
          stagingTargetPath: stagingOf(),
          volumeCapability: { accessMode: { mode: 'SINGLE_NODE_WRITER' }, mount: { fsType: 'xfs', mountFlags: [], volumeMountGroup: '' } },
          secrets: { s: 't' },
        },
      ]);
    });

    it('a plugin that answers no capacity (or 0) is taken to have the capacity asked for; no staging path without STAGE_UNSTAGE_VOLUME', async () => {
      await offer('EXPAND_VOLUME');
      expect(await vm.expandVolume({ id: 'vol-1', pluginId: 'my-plugin' }, 'alloc-a', usage, 4096)).toBe(4096);
      b().answers.set('NodeExpandVolume', () => ({ capacityBytes: '0' }));
      expect(await vm.expandVolume(vol, 'alloc-a', usage, 2048)).toBe(2048);
      expect(calls('NodeExpandVolume').map((c) => c.request)).toEqual([
        expect.not.objectContaining({ stagingTargetPath: expect.anything() }),
        expect.not.objectContaining({ stagingTargetPath: expect.anything() }),
      ]);
      expect(calls('NodeExpandVolume')[0]!.request).toMatchObject({ volumeId: 'vol-1', secrets: {} });
    });

    it('checks the volume and the alloc first, and passes a plugin error on', async () => {
      await offer('EXPAND_VOLUME');
      await expect(vm.expandVolume(vol, '', usage, 1)).rejects.toBeInstanceOf(ValidationError);
      await expect(vm.expandVolume({ ...vol, id: '../x' }, 'alloc-a', usage, 1)).rejects.toBeInstanceOf(ValidationError);
      b().failNext('NodeExpandVolume', csiError(GrpcStatus.OUT_OF_RANGE, 'NodeExpandVolume', 'too big'));
      await expect(vm.expandVolume(vol, 'alloc-a', usage, 1)).rejects.toThrow(/too big/);
      expect(calls('NodeExpandVolume')).toHaveLength(1);
      expect(steps()).toEqual(['my-plugin:expand:error']);
    });
  });

  describe('step durations (VOLUME_STEP_SECONDS)', () => {
    it('records each step by plugin, step and result, with the time it took', async () => {
      const gate = b().gate('NodeStageVolume');
      const staging = vm.stageVolume(vol, usage);
      await gate.reached;
      await h.advance(1500);
      gate.release();
      await staging;
      await vm.publishVolume(vol, 'alloc-a', usage);
      await vm.unpublishVolume(vol, 'alloc-a', usage);
      await vm.unstageVolume(vol, usage);
      expect(steps()).toEqual(['my-plugin:stage:ok', 'my-plugin:publish:ok', 'my-plugin:unpublish:ok', 'my-plugin:unstage:ok']);
      expect(metrics.observed.map((o) => [o.name, o.value])).toEqual([
        [VOLUME_STEP_SECONDS.name, 1.5],
        [VOLUME_STEP_SECONDS.name, 0],
        [VOLUME_STEP_SECONDS.name, 0],
        [VOLUME_STEP_SECONDS.name, 0],
      ]);
    });

    it('a failed step records `error`, and the time spent queued behind another step of the volume counts', async () => {
      const gate = b().gate('NodeStageVolume');
      const staging = vm.stageVolume(vol, usage);
      await gate.reached;
      b().failNext('NodePublishVolume', csiError(GrpcStatus.INTERNAL, 'NodePublishVolume', 'no'));
      const publishing = vm.publishVolume(vol, 'alloc-a', usage).catch((e: unknown) => e);
      await h.advance(2000);
      gate.release();
      await staging;
      await publishing;
      expect(metrics.observed.map((o) => [o.labels.step, o.labels.result, o.value])).toEqual([
        ['stage', 'ok', 2],
        ['publish', 'error', 2],
      ]);
    });

    it('a step refused for its arguments records nothing; one that finds no plugin instance records an error', async () => {
      await expect(vm.stageVolume({ ...vol, pluginId: 'other' }, usage)).rejects.toBeInstanceOf(ValidationError);
      await expect(vm.publishVolume(vol, 'a/b', usage)).rejects.toBeInstanceOf(ValidationError);
      await expect(vm.unpublishVolume(vol, '', usage)).rejects.toBeInstanceOf(ValidationError);
      expect(metrics.observed).toEqual([]);
      h.registry.deregister('csi-node', 'my-plugin', 'alloc-0');
      await expect(vm.stageVolume(vol, usage)).rejects.toThrow(/not found/);
      expect(steps()).toEqual(['my-plugin:stage:error']);
    });

    it('a metrics implementation that throws changes no step outcome', async () => {
      metrics.observe = () => {
        throw new Error('metrics broke');
      };
      await vm.stageVolume(vol, usage);
      expect(await vm.publishVolume(vol, 'alloc-a', usage)).toMatchObject({ targetPath: targetOf('alloc-a') });
    });
  });

  it("hands the caller's signal to NodeGetVolumeStats and NodeExpandVolume", async () => {
    await offer('GET_VOLUME_STATS', 'EXPAND_VOLUME', 'VOLUME_CONDITION');
    for (const [method, call] of [
      ['NodeGetVolumeStats', (signal: AbortSignal) => vm.volumeCondition(vol, 'alloc-a', usage, 'target', { signal })],
      ['NodeGetVolumeStats', (signal: AbortSignal) => vm.volumeUsage(vol, 'alloc-a', usage, { signal })],
      ['NodeExpandVolume', (signal: AbortSignal) => vm.expandVolume(vol, 'alloc-a', usage, 4096, { signal })],
    ] as const) {
      const gate = b().gate(method);
      const ac = new AbortController();
      const asked = call(ac.signal).catch((e: unknown) => e);
      await gate.reached;
      ac.abort();
      expect(await asked).toBeInstanceOf(AbortError);
      gate.release();
    }
    expect(calls('NodeGetVolumeStats')).toHaveLength(2);
    expect(calls('NodeExpandVolume')).toHaveLength(1);
  });
});
