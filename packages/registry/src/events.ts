// Event payloads of the plugin registry. Events fire after the change is
// persisted and the registry's state is consistent, in the order the
// changes happened.
import type { RegisteredPlugin } from './plugin-types';

/**
 * Why a `registered` event fired:
 * - `new`: an alloc registered (type, name) for the first time; it is active.
 * - `updated`: an alloc already in the list re-registered with different info
 *   (e.g. a new socket after a restart); it keeps its place, see `active`.
 * - `promoted`: the active entry was deregistered and this one, next in line,
 *   became active.
 * - `confirmed`: the active entry, restored from the state DB, was registered
 *   again by its alloc with the same info (its plugin is back after an agent
 *   restart).
 */
export type PluginRegisteredReason = 'new' | 'updated' | 'promoted' | 'confirmed';

export interface PluginRegisteredEvent {
  readonly kind: 'registered';
  readonly plugin: RegisteredPlugin;
  /** Whether `plugin` is the active entry for its (type, name) after the change. */
  readonly active: boolean;
  readonly reason: PluginRegisteredReason;
}

export interface PluginDeregisteredEvent {
  readonly kind: 'deregistered';
  /** The entry that was removed. */
  readonly plugin: RegisteredPlugin;
  /** Whether it was the active entry. A `registered` (`promoted`) event follows for the next one, if any. */
  readonly wasActive: boolean;
}

export type PluginEvent = PluginRegisteredEvent | PluginDeregisteredEvent;
