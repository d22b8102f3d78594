// ClientStateDB: the client state of ARCHITECTURE.md ("What is kept where"), the one
// file where the registry, the CSI manager, the hooks and the agent keep what
// must survive an agent restart. It is the aggregate of the narrow stores
// (RegistryStateStore, AllocStateStore, VolumeStateStore) that
// BoltClientStateDB implements; each package depends on the narrow store it
// uses and keeps its own record types. Values are JSON.
import type { Disposable } from '@csiplug/core';
import type { AllocStateStore } from './alloc-state-store';
import type { RegistryStateStore } from './registry-state-store';
import type { VolumeStateStore } from './volume-state-store';

/**
 * A state file that was there when the store opened but held no state — 0
 * bytes (truncated, or its contents lost), or a database without a schema —
 * and so was started empty: whatever an earlier agent ran or mounted is not
 * known to this one.
 */
export interface FoundEmptyState {
  file: string;
  /** Its size before the open. */
  bytes: number;
  /** One sentence naming the file and what was found. */
  why: string;
}

export interface ClientStateDB extends RegistryStateStore, AllocStateStore, VolumeStateStore, Disposable {
  /** The schema version the store is at (after any migration on open). */
  readonly schemaVersion: number;
  /** The file behind the store, or undefined for the in-memory one. */
  readonly path: string | undefined;
  /** Set when the file was there but held no state, and was started empty (undefined for a new file, a store with state, or memory). */
  readonly foundEmpty?: FoundEmptyState;
  /** True when the file was not there at all and this open created it (a first start, or a state.db someone deleted: the agent tells them apart by what else its data dir holds). */
  readonly createdNew?: boolean;

  /** Commits what batches wait for and releases the file (Disposable). Idempotent. */
  dispose(): void;
}
