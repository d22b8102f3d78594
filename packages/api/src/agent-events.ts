// AgentEvents: the agent's event stream (AgentService.onEvent). It carries
// the agent's own events (jobs, allocs, tasks) and relays what the CSI
// manager (plugin health, volume mounts) and the volume catalog report. It
// is the agent module's (agent-modules.ts): the module starts the relay
// before the CSI manager starts, so no early health change is missed, and the
// agent stops relaying first when it goes away — what its services report
// while they stop is not news.
import { DisposableStore, Emitter, type Clock, type Disposable, type Event } from '@csiplug/core';
import type { CSIManager } from '@csiplug/csimanager';
import type { VolumeCatalogService } from '@csiplug/volumes';
import type { AgentEvent } from './service';

/** An event as its source states it: the stream numbers it, and stamps it unless it says when. */
export type AgentEventInput = Omit<AgentEvent, 'index' | 'time'> & { time?: number };

export class AgentEvents implements Disposable {
  private readonly emitter = new Emitter<AgentEvent>();
  readonly onEvent: Event<AgentEvent> = this.emitter.event;
  private index = 0;
  private readonly relays = new DisposableStore();

  constructor(private readonly clock: Clock) {}

  emit(e: AgentEventInput): void {
    this.emitter.fire({ index: ++this.index, time: e.time ?? this.clock.now(), ...e });
  }

  /** Relays the CSI manager's and the catalog's events until stopRelaying() or dispose(). */
  relay(csi: CSIManager, catalog: VolumeCatalogService): void {
    this.relays.add(
      csi.onDidChangeHealth((c) =>
        this.emit({
          topic: 'Plugin',
          type: c.healthy ? 'Plugin healthy' : 'Plugin unhealthy',
          message: `plugin ${c.name} (${c.type}, alloc ${c.allocId}): ${c.description}`,
          pluginId: c.name,
          allocId: c.allocId,
        }),
      ),
    );
    this.relays.add(
      csi.onNodeEvent((e) =>
        this.emit({
          topic: 'Volume',
          type: e.message,
          message: `${e.message} ${e.details.volume_id} for alloc ${e.details.alloc_id}: ${e.details.success === 'true' ? 'ok' : `failed: ${e.details.error ?? ''}`}`,
          volumeId: e.details.volume_id,
          allocId: e.details.alloc_id,
          pluginId: e.details.plugin_id,
          details: { ...e.details },
        }),
      ),
    );
    this.relays.add(
      catalog.onDidChange((e) =>
        this.emit({
          topic: 'Volume',
          type: `Volume ${e.kind}`,
          message: e.message,
          volumeId: e.volumeId,
          ...(e.allocId ? { allocId: e.allocId } : {}),
        }),
      ),
    );
  }

  /** Stops relaying; the agent's own events still flow. */
  stopRelaying(): void {
    this.relays.clear();
  }

  dispose(): void {
    this.relays.dispose();
    this.emitter.dispose();
  }
}

export type IAgentEvents = AgentEvents;
export const IAgentEvents: unique symbol = Symbol('IAgentEvents');
