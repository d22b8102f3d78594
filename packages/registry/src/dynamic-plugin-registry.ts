// DynamicPluginRegistry: the default IPluginRegistry. Keeps, per (type, name),
// the registrations of the allocs running that plugin, newest first; writes
// every change to its store (IRegistryStore: the client state by default)
// before anyone hears of it; restores the lists, in order, when an agent
// starts over an existing state DB; and wakes waiters from its own
// `registered` events instead of polling.
import {
  Disposable,
  Emitter,
  Event,
  IClock,
  ILogger,
  ITimeoutPolicy,
  ShutdownError,
  ValidationError,
  abortReason,
  errorMessage,
  settleOnce,
  toDisposable,
} from '@csiplug/core';
import { inject, injectable } from 'tsyringe';
import { PluginNotFoundError, NoDispenserError, PluginWaitTimeoutError, RegistryPersistError, RegistryRestoreError } from './errors';
import type { PluginDeregisteredEvent, PluginEvent, PluginRegisteredEvent } from './events';
import type { PluginDispenser } from './plugin-dispensers';
import type { PluginRegistry, PluginTypeEvents, WaitForPluginOptions } from './plugin-registry';
import { DEFAULT_PLUGIN_TYPES, PluginRegistration, RegisteredPlugin } from './plugin-types';
import { assertAllocId, assertKnownType, assertPluginName, sameInfo, toRecord, toView } from './registration';
import { checkRegistryDocument, type PluginRegistrationRecord, type RegistryStateRecord, type StoredRegistryState } from './registry-store';
import { IPluginDispensers, IPluginRegistryConfig, IRegistryStore } from './tokens';

/** One entry of a (type, name) list. Immutable: a change makes a new Entry. */
interface Entry {
  readonly record: Readonly<PluginRegistrationRecord>;
  readonly view: RegisteredPlugin;
}

type Plugins = RegistryStateRecord['plugins'];

/**
 * A copy of `from` without a prototype: plugin names and types are keys, and
 * a name like "__proto__" must be a key like any other (on a plain object it
 * would hit the prototype setter and vanish from the stored JSON).
 */
function dict<T>(from?: Record<string, T>): Record<string, T> {
  return Object.assign(Object.create(null) as Record<string, T>, from);
}

interface Waiter {
  readonly type: string;
  readonly name: string;
  settle(outcome: { plugin: RegisteredPlugin } | { error: Error }): void;
}

function entry(record: Readonly<PluginRegistrationRecord>, restored: boolean): Entry {
  return { record, view: toView(record, restored) };
}

function keyOf(type: string, name: string): string {
  // NUL cannot occur in a validated type or name, so the key is unambiguous.
  return `${type}\0${name}`;
}

@injectable()
export class DynamicPluginRegistry implements PluginRegistry {
  readonly types: readonly string[];
  private readonly known: ReadonlySet<string>;
  private readonly log: ILogger;

  /** type → name → entries, newest first. Lists are replaced, never edited in place. */
  private readonly plugins = new Map<string, Map<string, readonly Entry[]>>();
  /** The persisted form of `plugins`, rebuilt by copy-on-write for each change. */
  private persisted: RegistryStateRecord = { plugins: dict() };

  private readonly registeredEmitter: Emitter<PluginRegisteredEvent>;
  private readonly deregisteredEmitter: Emitter<PluginDeregisteredEvent>;
  private readonly changeEmitter: Emitter<PluginEvent>;
  readonly onDidRegister: Event<PluginRegisteredEvent>;
  readonly onDidDeregister: Event<PluginDeregisteredEvent>;
  readonly onDidChange: Event<PluginEvent>;

  /** Events not yet delivered; see deliver(). */
  private readonly queue: PluginEvent[] = [];
  private delivering: PluginEvent | undefined;
  private readonly waiters = new Map<string, Set<Waiter>>();
  private shut = false;

  constructor(
    @inject(IRegistryStore) private readonly store: IRegistryStore,
    @inject(IClock) private readonly clock: IClock,
    @inject(ILogger) logger: ILogger,
    @inject(ITimeoutPolicy) private readonly timeouts: ITimeoutPolicy,
    @inject(IPluginDispensers) private readonly dispensers: IPluginDispensers,
    // Optional without a default value: StrykerJS drops the decorator of a parameter that has one (npm run mutation).
    @inject(IPluginRegistryConfig) config?: IPluginRegistryConfig,
  ) {
    this.log = logger.child({ component: 'plugin-registry' });
    const types = [...DEFAULT_PLUGIN_TYPES];
    for (const t of config?.extraTypes ?? []) {
      if (typeof t !== 'string' || t.length === 0 || t.includes('\0') || t.includes('/')) {
        throw new ValidationError(`plugin registry: extra type "${String(t)}" is not a valid type name`, 'types');
      }
      if (!types.includes(t)) types.push(t);
    }
    this.types = Object.freeze(types);
    this.known = new Set(types);

    const onListenerError = (err: unknown) => {
      const e = this.delivering;
      this.log.error('a plugin registry event listener threw; the other listeners still ran', {
        error: err,
        event: e?.kind,
        type: e?.plugin.type,
        name: e?.plugin.name,
        allocId: e?.plugin.allocId,
      });
    };
    this.registeredEmitter = new Emitter({ onListenerError });
    this.deregisteredEmitter = new Emitter({ onListenerError });
    this.changeEmitter = new Emitter({ onListenerError });
    this.onDidRegister = this.registeredEmitter.event;
    this.onDidDeregister = this.deregisteredEmitter.event;
    this.onDidChange = this.changeEmitter.event;

    this.restore();
  }

  // ---- events ---------------------------------------------------------------

  eventsOf(type: string): PluginTypeEvents {
    this.checkType(type);
    return {
      onDidRegister: Event.filter(this.onDidRegister, (e) => e.plugin.type === type),
      onDidDeregister: Event.filter(this.onDidDeregister, (e) => e.plugin.type === type),
      onDidChange: Event.filter(this.onDidChange, (e) => e.plugin.type === type),
    };
  }

  // ---- changes --------------------------------------------------------------

  register(registration: PluginRegistration): RegisteredPlugin {
    this.checkOpen('register a plugin');
    const record = toRecord(registration, this.known, this.types);
    const { type, name, allocId } = record;
    const list = this.listOf(type, name);
    const at = list.findIndex((e) => e.record.allocId === allocId);

    if (at < 0) {
      // A new alloc for this plugin: it goes to the front and becomes active.
      const added = entry(record, false);
      this.commit(type, name, [added, ...list], `register ${type}/${name} for alloc ${allocId}`);
      this.log.info('plugin registered', {
        type,
        name,
        allocId,
        socketPath: record.socketPath,
        version: record.version,
        previous: list[0]?.record.allocId,
      });
      this.emit({ kind: 'registered', plugin: added.view, active: true, reason: 'new' });
      return added.view;
    }

    // The same alloc again (a plugin task restarted, or re-registering after an
    // agent restart): it keeps its place, so an older alloc coming back never
    // displaces a newer one.
    const current = list[at]!;
    if (sameInfo(current.record, record)) {
      if (!current.view.restored) return current.view;
      // Only the in-memory flag changes; the stored form is the same. It is
      // still news: the plugin is back after an agent restart, and whoever
      // waits on it (the CSI manager, a restoring volume hook) should look now
      // rather than at its next periodic round.
      const confirmed = entry(current.record, false);
      this.replaceInMemory(type, name, list, at, confirmed);
      this.log.info('restored plugin re-registered', { type, name, allocId, active: at === 0 });
      // An inactive entry coming back changes nothing anyone acts on.
      if (at === 0) this.emit({ kind: 'registered', plugin: confirmed.view, active: true, reason: 'confirmed' });
      return confirmed.view;
    }
    const updated = entry(record, false);
    const next = [...list];
    next[at] = updated;
    this.commit(type, name, next, `update ${type}/${name} for alloc ${allocId}`);
    this.log.info('plugin re-registered with new info', {
      type,
      name,
      allocId,
      socketPath: record.socketPath,
      version: record.version,
      active: at === 0,
    });
    this.emit({ kind: 'registered', plugin: updated.view, active: at === 0, reason: 'updated' });
    return updated.view;
  }

  deregister(type: string, name: string, allocId: string): boolean {
    this.checkOpen('deregister a plugin');
    this.checkType(type);
    assertPluginName(name);
    assertAllocId(allocId);
    const list = this.listOf(type, name);
    const at = list.findIndex((e) => e.record.allocId === allocId);
    if (at < 0) {
      // The orchestrator may deregister an alloc that never registered (a
      // failed start): nothing to remove, nothing to tell anyone.
      this.log.debug('deregister: no entry for alloc', { type, name, allocId });
      return false;
    }
    const removed = list[at]!;
    const next = [...list.slice(0, at), ...list.slice(at + 1)];
    this.commit(type, name, next, `deregister ${type}/${name} for alloc ${allocId}`);
    const promoted = at === 0 ? next[0] : undefined;
    this.log.info('plugin deregistered', { type, name, allocId, wasActive: at === 0, active: next[0]?.record.allocId });
    // Both events are queued together so a listener that changes the
    // registry in between cannot make the promotion event stale.
    const events: PluginEvent[] = [{ kind: 'deregistered', plugin: removed.view, wasActive: at === 0 }];
    if (promoted) events.push({ kind: 'registered', plugin: promoted.view, active: true, reason: 'promoted' });
    this.emit(...events);
    return true;
  }

  confirmAlive(type: string, name: string, allocId: string): boolean {
    this.checkType(type);
    const list = this.listOf(type, name);
    const at = list.findIndex((e) => e.record.allocId === allocId);
    if (at < 0) return false;
    const current = list[at]!;
    if (current.view.restored) {
      this.replaceInMemory(type, name, list, at, entry(current.record, false));
      this.log.debug('restored plugin confirmed alive', { type, name, allocId });
    }
    return true;
  }

  // ---- reads ----------------------------------------------------------------

  get(type: string, name: string): RegisteredPlugin | undefined {
    this.checkType(type);
    return this.listOf(type, name)[0]?.view;
  }

  list(type: string): RegisteredPlugin[] {
    this.checkType(type);
    const byName = this.plugins.get(type);
    if (!byName) return [];
    return [...byName.keys()].sort().map((name) => byName.get(name)![0]!.view);
  }

  registrations(type: string, name: string): RegisteredPlugin[] {
    this.checkType(type);
    return this.listOf(type, name).map((e) => e.view);
  }

  allocPlugins(allocId: string): RegisteredPlugin[] {
    const out: RegisteredPlugin[] = [];
    for (const byName of this.plugins.values()) {
      for (const list of byName.values()) {
        for (const e of list) if (e.record.allocId === allocId) out.push(e.view);
      }
    }
    return out;
  }

  dispense<T = unknown>(type: string, name: string): T {
    this.checkType(type);
    const dispenser = this.dispensers.get(type);
    if (!dispenser) throw new NoDispenserError(type);
    const active = this.listOf(type, name)[0];
    if (!active) throw new PluginNotFoundError(type, name);
    return dispenser(active.view) as T;
  }

  registerDispenser(type: string, dispenser: PluginDispenser): Disposable {
    this.checkType(type);
    return this.dispensers.register(type, dispenser);
  }

  // ---- waiting --------------------------------------------------------------

  waitForPlugin(type: string, name: string, options: WaitForPluginOptions = {}): Promise<RegisteredPlugin> {
    try {
      this.checkType(type);
      assertPluginName(name);
    } catch (err) {
      return Promise.reject(err);
    }
    const { signal } = options;
    const timeout = options.timeout ?? this.timeouts.registryWait();
    if (typeof timeout !== 'number' || Number.isNaN(timeout) || timeout < 0) {
      return Promise.reject(
        new ValidationError(
          `the wait for a plugin: its timeout ${String(timeout)} is not a non-negative number of milliseconds`,
          'timeout',
        ),
      );
    }
    if (this.shut) return Promise.reject(this.shutdownError(type, name));
    if (signal?.aborted) return Promise.reject(abortReason(signal));

    // No lost wake-up. JavaScript runs this method to completion: from the
    // check below to the moment the waiter is in `this.waiters`, no other
    // code — no register(), no listener — can run. So either the plugin is
    // active now (resolve at once) or any later registration of (type, name)
    // happens after the waiter is in place. Every change that makes an empty
    // (type, name) non-empty emits `registered`, and delivery wakes the
    // waiters of that key (wake()), re-reading the active entry at that moment
    // rather than trusting the event, so a registration made inside another
    // listener, or in the same tick as this call, is seen either here or
    // there.
    const active = this.listOf(type, name)[0];
    if (active) return Promise.resolve(active.view);

    const key = keyOf(type, name);
    const started = this.clock.now();
    // settleOnce owns the deadline timer and the abort listener; the waiter
    // leaves `this.waiters` however the wait ends.
    return settleOnce<RegisteredPlugin>(
      (wait) => {
        const waiter: Waiter = {
          type,
          name,
          settle: (outcome) => ('plugin' in outcome ? wait.resolve(outcome.plugin) : wait.reject(outcome.error)),
        };
        let set = this.waiters.get(key);
        if (!set) this.waiters.set(key, (set = new Set()));
        set.add(waiter);
        wait.own(
          toDisposable(() => {
            const current = this.waiters.get(key);
            current?.delete(waiter);
            if (current?.size === 0) this.waiters.delete(key);
          }),
        );
      },
      {
        signal,
        deadline: { clock: this.clock, ms: timeout, error: () => new PluginWaitTimeoutError(type, name, this.clock.now() - started) },
      },
    );
  }

  // ---- lifecycle ------------------------------------------------------------

  get isDisposed(): boolean {
    return this.shut;
  }

  dispose(): void {
    if (this.shut) return;
    this.shut = true;
    this.queue.length = 0;
    const pending = [...this.waiters.values()].flatMap((s) => [...s]);
    for (const w of pending) w.settle({ error: this.shutdownError(w.type, w.name) });
    this.registeredEmitter.dispose();
    this.deregisteredEmitter.dispose();
    this.changeEmitter.dispose();
    this.log.debug('plugin registry shut down', { rejectedWaits: pending.length });
  }

  // ---- internals ------------------------------------------------------------

  private checkType(type: string): void {
    assertKnownType(type, this.known, this.types);
  }

  private checkOpen(what: string): void {
    if (this.shut) throw new ShutdownError(`the plugin registry is shut down; cannot ${what}`);
  }

  private shutdownError(type: string, name: string): ShutdownError {
    return new ShutdownError(`the plugin registry shut down while waiting for plugin "${name}" of type ${type}`);
  }

  private listOf(type: string, name: string): readonly Entry[] {
    return this.plugins.get(type)?.get(name) ?? [];
  }

  /**
   * Persists the registry with (type, name) set to `next`, then applies it in
   * memory. If the write throws, memory is untouched and the error says so:
   * callers see either the old state everywhere or the new one everywhere.
   */
  private commit(type: string, name: string, next: readonly Entry[], what: string): void {
    const byName = dict(this.persisted.plugins[type]);
    if (next.length > 0) byName[name] = Object.freeze(next.map((e) => e.record));
    else delete byName[name];
    const plugins: Plugins = dict(this.persisted.plugins);
    if (Object.keys(byName).length > 0) plugins[type] = byName;
    else delete plugins[type];
    const candidate: RegistryStateRecord = { plugins };
    try {
      // The stored form is plain nested objects and arrays (order is the
      // array order), so any JSON encoder keeps it.
      this.store.putRegistryState(candidate);
    } catch (err) {
      this.log.error('could not persist the plugin registry; change refused', { what, error: err });
      throw new RegistryPersistError(what, err);
    }
    this.persisted = candidate;
    this.setList(type, name, next);
  }

  private replaceInMemory(type: string, name: string, list: readonly Entry[], at: number, replacement: Entry): void {
    const next = [...list];
    next[at] = replacement;
    this.setList(type, name, next);
  }

  private setList(type: string, name: string, next: readonly Entry[]): void {
    let byName = this.plugins.get(type);
    if (next.length === 0) {
      byName?.delete(name);
      if (byName?.size === 0) this.plugins.delete(type);
      return;
    }
    if (!byName) this.plugins.set(type, (byName = new Map()));
    byName.set(name, next);
  }

  /**
   * Events go through one queue so every listener sees them in the order the
   * changes happened, even when a listener changes the registry: the nested
   * change is persisted and applied at once, but its event is delivered after
   * the current one has reached every listener.
   */
  private emit(...events: PluginEvent[]): void {
    if (this.shut) return;
    this.queue.push(...events);
    if (this.delivering) return;
    try {
      for (let next = this.queue.shift(); next && !this.shut; next = this.queue.shift()) {
        this.delivering = next;
        if (next.kind === 'registered') this.registeredEmitter.fire(next);
        else this.deregisteredEmitter.fire(next);
        this.changeEmitter.fire(next);
        if (next.kind === 'registered') this.wake(next.plugin.type, next.plugin.name);
      }
    } finally {
      this.delivering = undefined;
    }
  }

  /** Resolves the waiters of (type, name) with whatever is active now, if anything. */
  private wake(type: string, name: string): void {
    const set = this.waiters.get(keyOf(type, name));
    if (!set) return;
    const active = this.listOf(type, name)[0];
    if (!active) return; // removed again before this event was delivered; a later registration wakes them
    for (const w of [...set]) w.settle({ plugin: active.view });
  }

  /** Reads the lists back, in order. Every entry is `restored` until its plugin re-registers or is confirmed alive. */
  private restore(): void {
    // A store checks the document down to its `plugins` object (a malformed
    // one throws); it is checked again here because a bare client state also
    // fits the store's type. Everything inside is checked below.
    let stored: StoredRegistryState | undefined;
    try {
      stored = checkRegistryDocument(this.store.getRegistryState(), 'the registry store');
    } catch (err) {
      throw new RegistryRestoreError(err);
    }
    if (stored === undefined) return;
    let count = 0;
    let dropped = 0;
    for (const [type, byName] of Object.entries(stored.plugins)) {
      if (typeof byName !== 'object' || byName === null || Array.isArray(byName)) {
        this.log.error('restore: dropping a malformed plugin type entry (not an object of registration lists)', { type });
        continue;
      }
      if (!this.known.has(type)) {
        const n = Object.values(byName).reduce((s: number, l) => s + (Array.isArray(l) ? l.length : 0), 0);
        dropped += n;
        this.log.warn(
          'restore: dropping registrations of an unknown plugin type; they re-register if their plugin still runs and the type is configured',
          { type, registrations: n, knownTypes: this.types },
        );
        continue;
      }
      for (const [name, records] of Object.entries(byName as Record<string, unknown>)) {
        if (!Array.isArray(records)) {
          this.log.error('restore: dropping a malformed registration list', { type, name });
          continue;
        }
        const entries: Entry[] = [];
        for (const raw of records) {
          try {
            const record = toRecord(raw as PluginRegistration, this.known, this.types);
            if (record.type !== type || record.name !== name)
              throw new Error(`stored under ${type}/${name} but names ${record.type}/${record.name}`);
            if (entries.some((e) => e.record.allocId === record.allocId))
              throw new Error(`alloc ${record.allocId} appears twice; keeping the newer entry`);
            entries.push(entry(record, true));
          } catch (err) {
            dropped++;
            this.log.error('restore: dropping an invalid registration', {
              type,
              name,
              allocId: (raw as { allocId?: unknown })?.allocId,
              error: errorMessage(err),
            });
          }
        }
        if (entries.length === 0) continue;
        count += entries.length;
        this.setList(type, name, entries);
        (this.persisted.plugins[type] ??= dict())[name] = Object.freeze(entries.map((e) => e.record));
      }
    }
    if (count > 0 || dropped > 0) this.log.info('plugin registry restored', { registrations: count, dropped });
  }
}
