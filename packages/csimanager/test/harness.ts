// Builds a CSI manager over the real plugin registry (on the real in-memory
// client state), with fakes for time, CSI clients and the mount table.
import { promises as fs, mkdtempSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DefaultTimeoutPolicy, FixedHeartbeatStrategy, MemoryLogger, type Metrics, type TimeoutSettings } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { FakeCSIClientFactory } from '@csiplug/csi/testing';
import { DynamicPluginRegistry, PluginDispenserTable, type PluginRegistration, StateRegistryStore } from '@csiplug/registry';
import { type ClientStateDB, openClientState } from '@csiplug/state';
import { DefaultCSIManager, type NodeEvent, type PluginHealthChange } from '../src';
import { FakeMountTable } from '../src/testing';

export const FINGERPRINT_PERIOD = 30_000;

export interface HarnessOptions {
  resync?: boolean;
  timeouts?: Partial<TimeoutSettings>;
  /** Where the manager records its figures; none (NullMetrics) when absent. */
  metrics?: Metrics;
}

export class Harness {
  readonly clock = new FakeClock();
  readonly logger = new MemoryLogger();
  readonly db: ClientStateDB = openClientState({ memory: true });
  readonly mounts = new FakeMountTable();
  readonly factory = new FakeCSIClientFactory(this.mounts);
  readonly policy: DefaultTimeoutPolicy;
  readonly heartbeat = new FixedHeartbeatStrategy({ fingerprintInterval: FINGERPRINT_PERIOD, interval: FINGERPRINT_PERIOD });
  readonly dataDir = mkdtempSync(path.join(os.tmpdir(), 'csiplug-csimanager-unit-'));
  readonly health: PluginHealthChange[] = [];
  readonly nodeEvents: NodeEvent[] = [];
  registry!: DynamicPluginRegistry;
  manager!: DefaultCSIManager;

  constructor(private readonly options: HarnessOptions = {}) {
    this.policy = new DefaultTimeoutPolicy(options.timeouts);
    this.build();
  }

  private build(): void {
    this.registry = new DynamicPluginRegistry(
      new StateRegistryStore(this.db),
      this.clock,
      this.logger,
      this.policy,
      new PluginDispenserTable(),
      {},
    );
    this.manager = new DefaultCSIManager(
      this.registry,
      this.factory,
      this.clock,
      this.logger,
      this.policy,
      this.heartbeat,
      this.mounts,
      { dataDir: this.dataDir, resync: this.options.resync ?? true },
      this.options.metrics,
    );
    this.manager.onDidChangeHealth((e) => this.health.push(e));
    this.manager.onNodeEvent((e) => this.nodeEvents.push(e));
  }

  /** An agent restart: manager and registry rebuilt over the same state (and the same plugins/mounts). */
  async restart(): Promise<void> {
    await this.manager.dispose();
    this.registry.dispose();
    this.build();
  }

  /** Lets pending promise chains run without moving time. */
  async settle(): Promise<void> {
    for (let i = 0; i < 5; i++) {
      await this.clock.advance(0);
      await new Promise<void>((r) => setImmediate(r));
    }
  }

  /** Moves the fake clock forward, then lets everything that woke up run. */
  async advance(ms: number): Promise<void> {
    await this.clock.advance(ms);
    await this.settle();
  }

  /** The fake behaviour of a registration's socket. */
  behaviour(reg: { socketPath: string }) {
    return this.factory.behaviourOf(reg.socketPath);
  }

  /** Tears everything down: manager, registry, client state, the data dir. */
  async dispose(): Promise<void> {
    await this.manager.dispose();
    this.registry.dispose();
    this.db.dispose();
    await fs.rm(this.dataDir, { recursive: true, force: true });
  }
}

/** A registration like Nomad's test helper: alloc-N, version vN, its own socket. */
export function plugin(idx: number | string, type = 'csi-node', over: Partial<PluginRegistration> = {}): PluginRegistration {
  const allocId = `alloc-${idx}`;
  return { type, name: 'my-plugin', version: `v${idx}`, allocId, socketPath: `/var/data/plugins/${allocId}/csi.sock`, ...over };
}
