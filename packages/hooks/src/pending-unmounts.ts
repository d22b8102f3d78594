// The pending-unmount queue: unmounts that failed in a csi hook's postrun
// are saved in the client state (csi/pending) and retried in the background
// with the policy's backoff, and at once when their plugin turns healthy. A
// restarted agent resumes them on start; shutdown stops the retries without
// dropping a single record.
import { Clock, Disposable, DisposableStore, IClock, ILogger, ITimeoutPolicy, Logger, TimeoutPolicy, errorMessage, formatDuration } from '@csiplug/core';
import { ICSIManager, type CSIManager } from '@csiplug/csimanager';
import { PluginTypeCSINode } from '@csiplug/registry';
import { IClientStateDB, type ClientStateDB, type PendingUnmountRecord, type VolumeMountStub } from '@csiplug/state';
import { inject, injectable } from 'tsyringe';
import { IVolumeClaimer } from './tokens';
import type { VolumeClaimer } from './volume-claimer';

/** Unpublishes (and unstages, for the last user) one saved mount, then releases the claim. */
export async function unmountFromStub(
  csi: CSIManager,
  claimer: VolumeClaimer,
  stub: Pick<VolumeMountStub, 'volumeId' | 'externalId' | 'pluginId' | 'usage'>,
  allocId: string,
  signal?: AbortSignal,
): Promise<void> {
  const volume = { id: stub.volumeId, externalId: stub.externalId ?? stub.volumeId, pluginId: stub.pluginId };
  await csi.volumeManager(stub.pluginId).unmountVolume(volume, allocId, stub.usage, { signal });
  await claimer.release(stub.volumeId, allocId, { signal });
}

@injectable()
export class PendingUnmounts implements Disposable {
  private readonly timers = new Map<string, Disposable>();
  private readonly inFlight = new Set<string>();
  private readonly subscriptions = new DisposableStore();
  private readonly log: Logger;
  private stopped = false;

  constructor(
    @inject(ICSIManager) private readonly csi: CSIManager,
    @inject(IVolumeClaimer) private readonly claimer: VolumeClaimer,
    @inject(IClientStateDB) private readonly state: ClientStateDB,
    @inject(IClock) private readonly clock: Clock,
    @inject(ITimeoutPolicy) private readonly timeouts: TimeoutPolicy,
    @inject(ILogger) logger: Logger,
  ) {
    this.log = logger.child({ component: 'pending-unmounts' });
  }

  /** Resumes every saved pending unmount, and retries a plugin's at once when it turns healthy. */
  start(): void {
    this.subscriptions.add(
      this.csi.onDidChangeHealth((change) => {
        if (!change.healthy || change.type !== PluginTypeCSINode) return;
        for (const record of this.state.listPendingUnmounts()) {
          if (record.pluginId === change.name) this.schedule(record, 0);
        }
      }),
    );
    const records = this.state.listPendingUnmounts();
    if (records.length) this.log.info('resuming pending unmounts', { count: records.length });
    for (const record of records) this.schedule(record, 0);
  }

  /** Records a failed unmount and schedules its first retry. */
  enqueue(allocId: string, stub: VolumeMountStub, error: unknown): PendingUnmountRecord {
    const record: PendingUnmountRecord = {
      id: `${allocId}/${stub.name}`,
      allocId,
      pluginId: stub.pluginId,
      volumeId: stub.volumeId,
      volumeName: stub.name,
      usage: stub.usage,
      attempts: 1,
      lastError: errorMessage(error),
      since: this.clock.now(),
    };
    if (stub.externalId) record.externalId = stub.externalId;
    this.state.putPendingUnmount(record);
    this.log.warn('unmount failed; retrying in the background', { alloc_id: allocId, volume_id: stub.volumeId, plugin_id: stub.pluginId, error });
    this.schedule(record, this.timeouts.unmountBackoff(1));
    return record;
  }

  /** The records waiting now. */
  list(): PendingUnmountRecord[] {
    return this.state.listPendingUnmounts();
  }

  /** Stops retrying; the records stay in the state for the next start. */
  dispose(): void {
    this.stopped = true;
    this.subscriptions.dispose();
    for (const t of this.timers.values()) t.dispose();
    this.timers.clear();
  }

  private schedule(record: PendingUnmountRecord, delay: number): void {
    if (this.stopped || this.inFlight.has(record.id)) return;
    this.timers.get(record.id)?.dispose();
    this.timers.set(
      record.id,
      this.clock.setTimeout(() => {
        this.timers.delete(record.id);
        void this.attempt(record.id);
      }, delay),
    );
  }

  private async attempt(id: string): Promise<void> {
    const record = this.state.listPendingUnmounts().find((r) => r.id === id);
    if (!record || this.stopped) return;
    this.inFlight.add(id);
    try {
      await unmountFromStub(this.csi, this.claimer, record, record.allocId);
      this.state.deletePendingUnmount(id);
      this.dropStub(record);
      this.log.info('pending unmount done', { alloc_id: record.allocId, volume_id: record.volumeId, attempts: record.attempts + 1 });
    } catch (err) {
      const next: PendingUnmountRecord = { ...record, attempts: record.attempts + 1, lastError: errorMessage(err) };
      if (!this.stopped) this.state.putPendingUnmount(next);
      const overdue = this.clock.now() - record.since > this.timeouts.pluginWait('postrun');
      (overdue ? this.log.error : this.log.warn).call(this.log, overdue ? `unmount still failing after ${formatDuration(this.timeouts.pluginWait('postrun'))}; still retrying` : 'pending unmount failed again', {
        alloc_id: record.allocId,
        volume_id: record.volumeId,
        plugin_id: record.pluginId,
        attempts: next.attempts,
        error: err,
      });
      this.inFlight.delete(id);
      this.schedule(next, this.timeouts.unmountBackoff(next.attempts));
      return;
    }
    this.inFlight.delete(id);
  }

  private dropStub(record: PendingUnmountRecord): void {
    if (!record.volumeName) return;
    const stubs = this.state.getVolumeStubs(record.allocId);
    if (!stubs || !(record.volumeName in stubs)) return;
    const rest = { ...stubs };
    delete rest[record.volumeName];
    this.state.putVolumeStubs(record.allocId, rest);
  }
}
