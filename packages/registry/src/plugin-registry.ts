// The contract of the dynamic plugin registry (token IPluginRegistry): which
// plugins, run as tasks, are registered on this node, who waits for them and
// who hears about changes.
import type { Disposable, Event } from '@csiplug/core';
import type { PluginDeregisteredEvent, PluginEvent, PluginRegisteredEvent } from './events';
import type { PluginDispenser } from './plugin-dispensers';
import type { PluginRegistration, RegisteredPlugin } from './plugin-types';

export interface WaitForPluginOptions {
  /** Gives up (rejecting with the signal's reason, or an AbortError) when it aborts. */
  signal?: AbortSignal;
  /**
   * Milliseconds to wait; defaults to TimeoutPolicy.registryWait(), the
   * catch-all for callers that set none. `Infinity` waits until a
   * registration, an abort or dispose().
   */
  timeout?: number;
}

/** The events of one plugin type. */
export interface PluginTypeEvents {
  readonly onDidRegister: Event<PluginRegisteredEvent>;
  readonly onDidDeregister: Event<PluginDeregisteredEvent>;
  readonly onDidChange: Event<PluginEvent>;
}

export interface PluginRegistry extends Disposable {
  /** Fires for each `registered` change: a new active entry, an updated entry, a promotion. */
  readonly onDidRegister: Event<PluginRegisteredEvent>;
  /** Fires when an entry is removed (never for an alloc that had none). */
  readonly onDidDeregister: Event<PluginDeregisteredEvent>;
  /** Both kinds, in the order they happened. */
  readonly onDidChange: Event<PluginEvent>;
  /** The events of one type only; throws UnknownPluginTypeError for an unknown type. */
  eventsOf(type: string): PluginTypeEvents;

  /** The plugin types this registry accepts. */
  readonly types: readonly string[];

  /**
   * Registers (or re-registers) an alloc's plugin; persists, then emits.
   * Returns the entry as stored. Throws ValidationError / UnknownPluginTypeError
   * for bad input, RegistryPersistError if the state DB refused the write
   * (nothing changed), ShutdownError after dispose().
   */
  register(registration: PluginRegistration): RegisteredPlugin;
  /** Removes `allocId`'s entry for (type, name); returns whether there was one. */
  deregister(type: string, name: string, allocId: string): boolean;
  /**
   * Clears the `restored` flag of a restored entry once the CSI manager has
   * reached its plugin. Returns whether the entry exists. Emits nothing.
   */
  confirmAlive(type: string, name: string, allocId: string): boolean;

  /** The active entry for (type, name). */
  get(type: string, name: string): RegisteredPlugin | undefined;
  /** The active entry of every plugin of `type`, sorted by name. */
  list(type: string): RegisteredPlugin[];
  /** Every entry for (type, name), newest first; the first is active. */
  registrations(type: string, name: string): RegisteredPlugin[];
  /** Every entry (active or not, any type) of one alloc. */
  allocPlugins(allocId: string): RegisteredPlugin[];

  /** A client for the active entry, made by the dispenser bound for `type`. */
  dispense<T = unknown>(type: string, name: string): T;
  /** Adds the dispenser for a type (see IPluginDispensers); disposing removes it. */
  registerDispenser(type: string, dispenser: PluginDispenser): Disposable;

  /**
   * Resolves with the active entry of (type, name) as soon as there is one —
   * at once if there is one now — woken by the `registered` event, never by a
   * poll. Rejects with PluginWaitTimeoutError, the abort reason, or
   * ShutdownError.
   */
  waitForPlugin(type: string, name: string, options?: WaitForPluginOptions): Promise<RegisteredPlugin>;

  readonly isDisposed: boolean;
  /** Stops events, rejects pending waits with ShutdownError; later changes are refused. Idempotent. */
  dispose(): void;
}
