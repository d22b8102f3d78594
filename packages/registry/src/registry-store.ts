// RegistryStore: where the dynamic plugin registry keeps its one document —
// the records it writes, the contract of a store, and the check every store
// makes on what it reads back. The default store (StateRegistryStore) keeps
// the document in the client state; tests use FakeRegistryStore from
// @csiplug/registry/testing. Both pass the conformance suite shipped there.
// The method names are the client state's own (RegistryStateStore), so a
// bare client state still fits where a store is asked for; it does not check
// the document, which is why the registry checks again what it restores.
import { RegistryError } from './errors';

/** One plugin registration as stored; `options` holds e.g. mount points. */
export interface PluginRegistrationRecord {
  type: string;
  name: string;
  version: string;
  allocId: string;
  socketPath: string;
  options: Record<string, string>;
}

/** The registry document: per type, per name, registrations newest first. */
export interface RegistryStateRecord {
  plugins: Record<string, Record<string, readonly PluginRegistrationRecord[]>>;
}

/**
 * A registry document as read back. Its shape is checked down to the
 * `plugins` object; what is inside is not: the registry checks each
 * registration against the types it is configured with and drops, with a
 * log line, what it cannot use.
 */
export interface StoredRegistryState {
  readonly plugins: Readonly<Record<string, unknown>>;
}

export interface RegistryStore {
  /**
   * The document last written, or undefined if there is none. Throws if it
   * cannot be read, and MalformedRegistryStateError if what is stored is not
   * a registry document.
   */
  getRegistryState(): StoredRegistryState | undefined;
  /** Replaces the document. Throws if it was not written; then nothing changed. */
  putRegistryState(state: RegistryStateRecord): void;
}

/** What a store holds is not a registry document. */
export class MalformedRegistryStateError extends RegistryError {
  constructor(readonly where: string) {
    super(
      'EREGISTRY_STATE_MALFORMED',
      `the stored registry state in ${where} has no "plugins" object; it was not written by this registry`,
    );
  }
}

/**
 * The check every RegistryStore makes on a document it read: undefined or
 * null means none was written; anything else must be an object with a
 * `plugins` object. `where` names the storage in the error.
 */
export function checkRegistryDocument(value: unknown, where: string): StoredRegistryState | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'object') throw new MalformedRegistryStateError(where);
  const plugins = (value as { plugins?: unknown }).plugins;
  if (typeof plugins !== 'object' || plugins === null) throw new MalformedRegistryStateError(where);
  return value as StoredRegistryState;
}
