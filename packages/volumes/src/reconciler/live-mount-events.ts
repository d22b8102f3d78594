// LiveMountEvents: how the volume reconciler tells what it finds of live
// mounts (stale, remounted, busy, abnormal, plugin away) — to every listener,
// to the listeners of one alloc, and as the last finding per mount that
// `volume status` shows. A listener that throws is logged, never the mount's
// fault; an alloc's emitter lives only while it has listeners.
import { Emitter, errorMessage, toDisposable, type Event, type Logger } from '@csiplug/core';
import type { LiveMountEvent } from './reconciler-service';
import { mountKey } from './mount-record';

export class LiveMountEvents {
  private readonly all: Emitter<LiveMountEvent>;
  readonly onDidCheckMount: Event<LiveMountEvent>;
  /** Per alloc: the emitter of its mounts' checks, while it has listeners. */
  private readonly byAlloc = new Map<string, Emitter<LiveMountEvent>>();
  /** The last live-mount finding per record key, in this run (for mountChecks). */
  private readonly lastChecks = new Map<string, LiveMountEvent>();
  private disposed = false;

  constructor(private readonly log: Logger) {
    this.all = new Emitter({
      onListenerError: (err) => this.log.error('a listener of live mount checks threw; the others still ran', { error: errorMessage(err) }),
    });
    this.onDidCheckMount = this.all.event;
  }

  emit(event: LiveMountEvent): void {
    this.lastChecks.set(mountKey(event.allocId, event.name), event);
    this.all.fire(event);
    this.byAlloc.get(event.allocId)?.fire(event);
  }

  /** The last finding of the mount with record key `key` in this run. */
  last(key: string): LiveMountEvent | undefined {
    return this.lastChecks.get(key);
  }

  /** The mount's record is gone: so is its last finding. */
  forget(key: string): void {
    this.lastChecks.delete(key);
  }

  onDidCheckMountOf(allocId: string): Event<LiveMountEvent> {
    return (listener, disposables) => {
      if (this.disposed) return toDisposable(() => undefined);
      let emitter = this.byAlloc.get(allocId);
      if (!emitter) {
        const made = new Emitter<LiveMountEvent>({
          onListenerError: (err) =>
            this.log.error('a listener of live mount checks threw; the others still ran', { alloc_id: allocId, error: errorMessage(err) }),
          // The last listener gone: so is the alloc's emitter (a map of allocs that once listened would only grow).
          onLastListenerRemove: () => {
            if (this.byAlloc.get(allocId) === made) this.byAlloc.delete(allocId);
          },
        });
        this.byAlloc.set(allocId, made);
        emitter = made;
      }
      return emitter.event(listener, disposables);
    };
  }

  dispose(): void {
    this.disposed = true;
    this.all.dispose();
    for (const e of this.byAlloc.values()) e.dispose();
    this.byAlloc.clear();
  }
}
