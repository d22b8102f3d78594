// RegistryStateStore: the client state's slot for the dynamic plugin
// registry's document (bucket dynamicplugins, key registry_state). The state
// stores it as JSON and knows nothing of its shape: @csiplug/registry owns
// the record types and checks what it reads back.

export interface RegistryStateStore {
  /** The stored registry document, decoded; undefined if none was written. Throws ErrDecode if it is not JSON. */
  getRegistryState<T = unknown>(): T | undefined;
  /** Replaces the registry document (one JSON value, written in one transaction). */
  putRegistryState(state: unknown): void;
}
