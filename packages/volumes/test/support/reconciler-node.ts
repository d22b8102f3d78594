// The volume reconciler's test node, shared by its unit tests
// (src/reconciler/*.spec.ts): what outlives an agent — the host's mounts (a
// FakeMountTable), the node plugin (a FakeCSIManager whose FakeVolumeManager
// changes those mounts), the catalog (a FakeClaimer), the client state (a
// FakeMountStore), the clock — and the real VolumeReconciler of the agent
// running now, with the request and path helpers the tests read as.
import { DefaultTimeoutPolicy, MemoryLogger, type TimeoutSettings } from '@csiplug/core';
import { FakeClock, flushMicrotasks } from '@csiplug/core/testing';
import { usageToFS, type UsageOptions } from '@csiplug/csimanager';
import { FakeCSIManager, FakeMountTable, type FakeVolumeManager } from '@csiplug/csimanager/testing';
import { mountKey, type VolumeMountRecord } from '../../src/reconciler/mount-record';
import type { LiveMountEvent, VolumeMountRequest } from '../../src/reconciler/reconciler-service';
import { VolumeReconciler } from '../../src/reconciler/volume-reconciler';
import { FakeClaimer } from '../../src/testing/fake-claimer';
import { FakeMountStore } from '../../src/testing/fake-mount-store';

export const PLUGIN = 'hostpath';
export const ROOT = `/var/lib/csiplug/csi/node/${PLUGIN}`;
export const RW: UsageOptions = { readOnly: false, attachmentMode: 'file-system', accessMode: 'single-node-writer' };
export const RO: UsageOptions = { readOnly: true, attachmentMode: 'file-system', accessMode: 'multi-node-reader-only' };
export const PRERUN = { phase: 'prerun' } as const;
export const RESTORE = { phase: 'restore' } as const;

/** Round numbers, so that the tests read as the policy: a 1m prerun wait, a 5m restore wait, a 30s postrun wait, backoffs doubling from 1s. */
export const TIMEOUTS: Partial<TimeoutSettings> = {
  pluginWaitPrerun: 60_000,
  pluginWaitRestore: 300_000,
  pluginWaitPostrun: 30_000,
  claimBackoffBase: 1_000,
  claimBackoffMax: 8_000,
  claimRetryLimit: 60_000,
  unmountBackoffBase: 1_000,
  unmountBackoffMax: 8_000,
};

export const stagingOf = (usage: UsageOptions = RW, volumeId = 'vol1') => `${ROOT}/staging/${volumeId}/${usageToFS(usage)}`;
export const targetOf = (allocId: string, usage: UsageOptions = RW, volumeId = 'vol1') =>
  `${ROOT}/per-alloc/${allocId}/${volumeId}/${usageToFS(usage)}`;
export const req = (allocId: string, over: Partial<VolumeMountRequest> = {}): VolumeMountRequest => ({
  allocId,
  name: 'data',
  volumeId: 'vol1',
  usage: RW,
  ...over,
});

/** What a step changed on the node, as FakeVolumeManager.changes lists it. */
export const staged = (usage: UsageOptions = RW) => `stage vol1 ${usageToFS(usage)}`;
export const published = (allocId: string, usage: UsageOptions = RW) => `publish vol1 ${allocId} ${usageToFS(usage)}`;
export const unpublished = (allocId: string, usage: UsageOptions = RW) => `unpublish vol1 ${allocId} ${usageToFS(usage)}`;
export const unstaged = (usage: UsageOptions = RW) => `unstage vol1 ${usageToFS(usage)}`;

/** A promise's outcome, readable without awaiting it. */
export interface Tracked<T> {
  readonly promise: Promise<T>;
  settled: boolean;
  value?: T;
  error?: unknown;
}
export function track<T>(promise: Promise<T>): Tracked<T> {
  const t: Tracked<T> = { promise, settled: false };
  promise.then(
    (v) => Object.assign(t, { settled: true, value: v }),
    (e: unknown) => Object.assign(t, { settled: true, error: e }),
  );
  return t;
}

/**
 * One node: what outlives an agent — the host's mounts, the node plugin, the
 * catalog, the client state, the clock — and the reconciler of the agent
 * running now. `restart()` is the agent dying where it is and a new one
 * starting over the same records.
 */
export class TestNode {
  readonly clock = new FakeClock();
  readonly logger = new MemoryLogger();
  readonly timeouts: DefaultTimeoutPolicy;
  readonly mounts = new FakeMountTable();
  readonly csi: FakeCSIManager;
  readonly claimer = new FakeClaimer();
  readonly store = new FakeMountStore();
  reconciler: VolumeReconciler;
  /** What the reconcilers said of live mounts (onDidCheckMount) when they looked at them, in order. */
  readonly checks: LiveMountEvent[] = [];
  /** What they said when a node plugin under live mounts stopped serving ('plugin-away'), kept apart from the looks. */
  readonly aways: LiveMountEvent[] = [];
  private readonly agents: VolumeReconciler[] = [];

  constructor(options: { timeouts?: Partial<TimeoutSettings>; pluginUp?: boolean } = {}) {
    this.timeouts = new DefaultTimeoutPolicy({ ...TIMEOUTS, ...options.timeouts });
    this.csi = new FakeCSIManager({ clock: this.clock, timeouts: this.timeouts, mounts: this.mounts });
    this.claimer.add('vol1');
    this.claimer.add('vol2');
    if (options.pluginUp ?? true) this.csi.bringUp(PLUGIN);
    this.reconciler = this.startAgent();
  }

  /** The node plugin's volume manager (there once the plugin first came up). */
  get vm(): FakeVolumeManager {
    const vm = this.csi.managers.get(PLUGIN);
    if (!vm) throw new Error(`test bug: plugin ${PLUGIN} never came up, so it has no volume manager`);
    return vm;
  }

  /** The steps asked of the node plugin so far. */
  calls(): string[] {
    return [...(this.csi.managers.get(PLUGIN)?.calls ?? [])];
  }

  /** What the steps changed on the node so far. */
  changes(): string[] {
    return [...(this.csi.managers.get(PLUGIN)?.changes ?? [])];
  }

  /** The stored record of (alloc, name). */
  record(allocId: string, name = 'data'): VolumeMountRecord | undefined {
    return this.store.snapshot()[mountKey(allocId, name)];
  }

  mounted(): string[] {
    return [...this.mounts.points].sort();
  }

  restart(): VolumeReconciler {
    this.reconciler.dispose();
    this.reconciler = this.startAgent();
    return this.reconciler;
  }

  /** Fires the timers due now and lets every promise chain that waits on nothing else run to its end. */
  async settle(): Promise<void> {
    await this.clock.advance(0);
    await flushMicrotasks(200);
  }

  dispose(): void {
    for (const agent of this.agents) agent.dispose();
  }

  private startAgent(): VolumeReconciler {
    const agent = new VolumeReconciler(this.csi, this.claimer, this.store, this.mounts, this.clock, this.timeouts, this.logger);
    agent.onDidCheckMount((e) => (e.kind === 'plugin-away' ? this.aways : this.checks).push(e));
    agent.start();
    this.agents.push(agent);
    return agent;
  }
}
