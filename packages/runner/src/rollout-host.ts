// What the job updater and its rollouts need from the agent: its allocs, a
// way to make, save and start a new one, the CSI manager's plugin
// instances and the event stream. The agent implements it over its runner
// table (R = AllocRunner); the specs over fakes.
import type { Clock, Event, Logger } from '@csiplug/core';
import type { PluginInfo } from '@csiplug/csimanager';
import type { MountedVolume } from '@csiplug/hooks';
import type { AgentEventInput } from '@csiplug/api';
import type { Alloc, TaskState } from '@csiplug/jobspec';
import type { AgentEvent } from '@csiplug/api';

/** One alloc as a rollout sees it; the agent's AllocRunner is one. */
export interface RolloutAlloc {
  readonly alloc: Alloc;
  /** The volumes its tasks see, saved with it. */
  readonly mountedVolumes: Record<string, MountedVolume>;
  /** Stops its tasks, then unmounts and releases its volumes; resolves when done. Idempotent. */
  stop(): Promise<void>;
  taskStates(): Record<string, TaskState>;
  /** Whether anything of it may still be alive: a task not known dead, a mount still wanted. */
  readonly needsTeardown: boolean;
  /** Its stop ended before stopping anything, the agent going away (AllocRunner.stopCutShort). */
  readonly stopCutShort?: boolean;
}

export interface RolloutHost<R extends RolloutAlloc = RolloutAlloc> {
  readonly clock: Clock;
  readonly logger: Logger;
  /** Every alloc of the job this agent holds, stopped ones included. */
  allocsOf(jobId: string): R[];
  /** Every job this agent holds an alloc of. */
  jobIds(): string[];
  /** Makes the runner of a new alloc; nothing is saved or started yet. */
  prepare(alloc: Alloc): R;
  /**
   * Saves the records of `allocs` in one write, together with `stopping`
   * recorded as desired stop (the next agent finishes their teardown): all
   * of them, or (it throws) none. `allocs` is never empty when `stopping`
   * is not (a run that stops something always records a new version).
   */
  save(allocs: readonly R[], stopping?: readonly R[]): void;
  /** Every registry entry of plugin (type, name), newest (the active one) first: an entry is made by a plugin's supervisor only once the plugin answered its probes. */
  pluginRegistrations(type: string, name: string): readonly { allocId: string; restored: boolean }[];
  /**
   * Removes a stopped alloc of an old version for good — its record, its
   * place among the agent's allocs, its alloc dir — if it holds nothing (no
   * task that may be alive, no volume record); returns whether it did.
   */
  forget(alloc: R): boolean;
  /** Adds a prepared, saved alloc to the agent's allocs and starts it. */
  launch(alloc: R): void;
  /** The CSI manager's plugin instances, with their health. */
  plugins(): readonly PluginInfo[];
  /** The agent's event stream: task, alloc and plugin events name their alloc. */
  readonly onEvent: Event<AgentEvent>;
  emit(event: AgentEventInput): void;
}
