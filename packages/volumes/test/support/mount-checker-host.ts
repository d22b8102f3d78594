// A MountChecker on a host of its own, without the reconciler, for its unit
// specs (src/reconciler/mount-checker-*.spec.ts): the records it is handed
// (attached), a remount the test answers, the plugin's health and condition
// answered by the test, a FakeMountTable and a FakeClock; it keeps every
// event, remount asked and remount reported.
import { DefaultTimeoutPolicy, MemoryLogger } from '@csiplug/core';
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import type { CSIManager, PluginInfo, VolumeCondition } from '@csiplug/csimanager';
import { FakeMountTable } from '@csiplug/csimanager/testing';
import { MountChecker, type RemountOutcome } from '../../src/reconciler/mount-checker';
import { mountKey, type VolumeMountRecord } from '../../src/reconciler/mount-record';
import type { LiveMountEvent } from '../../src/reconciler/reconciler-service';

export const PLUGIN = 'fuse';
export const STAGING = '/mnt/staging/vol1';
export const targetOf = (allocId: string) => `/mnt/target/${allocId}`;
export const keyOf = (allocId: string) => mountKey(allocId, 'data');

export const record = (allocId: string, over: Partial<VolumeMountRecord> = {}): VolumeMountRecord => ({
  allocId,
  name: 'data',
  volumeId: 'vol1',
  externalId: 'ext-vol1',
  pluginId: PLUGIN,
  usage: { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' },
  desired: 'mounted',
  claimed: true,
  staged: true,
  published: true,
  attempts: 0,
  since: 0,
  targetPath: targetOf(allocId),
  stagingPath: STAGING,
  ...over,
});

export interface ConditionCall {
  volume: { id: string; externalId: string; pluginId: string };
  allocId: string;
  at: string;
  options: { signal?: AbortSignal; hostPath?: string };
}

export class Harness {
  readonly clock = new FakeClock();
  readonly log = new MemoryLogger();
  readonly mounts = new FakeMountTable();
  readonly timeouts = new DefaultTimeoutPolicy({ unmountBackoffBase: 1_000, unmountBackoffMax: 8_000 });
  readonly records = new Map<string, VolumeMountRecord>();
  readonly events: LiveMountEvent[] = [];
  /** Every remount asked, as `<volume> <keys> restage=<volumes of the staging mounts staged again>`. */
  readonly remounts: string[] = [];
  readonly reported: string[] = [];
  readonly conditionCalls: ConditionCall[] = [];
  healthy = true;
  attachedCalls = 0;
  attached: (pluginId: string) => ReadonlyArray<readonly [string, VolumeMountRecord]> = (pluginId) =>
    [...this.records].filter(([, r]) => r.pluginId === pluginId);
  remount: (volumeId: string, keys: readonly string[], restage: ReadonlySet<string>) => Promise<RemountOutcome> = async (_v, keys) => ({
    done: new Set(keys),
    failed: new Map(),
  });
  condition: (call: ConditionCall) => Promise<VolumeCondition | undefined> = async () => undefined;
  readonly checker: MountChecker;

  constructor() {
    const csi = {
      pluginInfo: (_type: string, id: string) => (id === PLUGIN ? { healthy: this.healthy } : undefined),
      volumeManager: () => ({
        volumeCondition: (
          volume: ConditionCall['volume'],
          allocId: string,
          _usage: unknown,
          at: string,
          options: ConditionCall['options'],
        ) => {
          const call = { volume, allocId, at, options };
          this.conditionCalls.push(call);
          return this.condition(call);
        },
      }),
    } as unknown as CSIManager;
    this.checker = new MountChecker(
      { csi, mountTable: this.mounts, clock: this.clock, timeouts: this.timeouts, log: this.log },
      {
        attached: (pluginId) => {
          this.attachedCalls++;
          return this.attached(pluginId);
        },
        remount: (volumeId, keys, restage) => {
          this.remounts.push(`${volumeId} ${keys.join(',')} restage=${[...restage].map((k) => k.split('\0')[1]).join(',')}`);
          return this.remount(volumeId, keys, restage);
        },
        remountReported: (key) => this.reported.push(key),
        emit: (e) => this.events.push(e),
      },
    );
  }

  /** Records `r`, its target and staging path mounted. */
  add(...rs: VolumeMountRecord[]): void {
    for (const r of rs) {
      this.records.set(keyOf(r.allocId), r);
      if (r.targetPath && r.published) this.mounts.mark(r.targetPath);
      if (r.stagingPath && r.staged) this.mounts.mark(r.stagingPath);
    }
  }

  ready(e: { cause?: 'started' | 'recovered'; replaced?: string; allocId?: string } = {}): void {
    this.checker.pluginReady({
      info: { name: PLUGIN, allocId: e.allocId ?? 'plugin-1' } as PluginInfo,
      cause: e.cause ?? 'recovered',
      ...(e.replaced ? { replaced: { allocId: e.replaced, socketPath: '/old.sock' } } : {}),
      time: 0,
    });
  }

  retired(retiredAlloc = 'plugin-0'): void {
    this.checker.pluginRetired({
      info: { name: PLUGIN, allocId: 'plugin-1' } as PluginInfo,
      retired: { allocId: retiredAlloc, socketPath: '/old.sock' },
      time: 0,
    });
  }

  async settle(): Promise<void> {
    await this.clock.advance(0);
    await flushMicrotasks(200);
  }

  kinds(): string[] {
    return this.events.map((e) => `${e.kind} ${e.allocId}`);
  }

  message(kind: string, allocId: string): string | undefined {
    return this.events.find((e) => e.kind === kind && e.allocId === allocId)?.message;
  }
}
