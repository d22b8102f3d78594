// Opens a SQLite-backed state file for persistence tests. Uses the real
// ClientStateDB (openClientState) when @csiplug/state exports it; until then
// the registry's key is written through state's own SQLite DB, laid out the
// way ClientStateDB lays it out (bucket `dynamicplugins`, key
// `registry_state`, JSON).
import * as state from '@csiplug/state';
import type { ClientStateDB, RegistryStateRecord } from '@csiplug/state';

type OpenClientState = (options: { path: string }) => ClientStateDB;

export interface OpenedState {
  db: ClientStateDB;
  /** Whether this is the real ClientStateDB implementation. */
  real: boolean;
  close(): void;
}

export function openSqliteState(file: string): OpenedState {
  const open = (state as unknown as { openClientState?: OpenClientState }).openClientState;
  if (typeof open === 'function') {
    const db = open({ path: file });
    return { db, real: true, close: () => db.close() };
  }
  const db = state.DB.open(file);
  const partial = {
    getRegistryState(): RegistryStateRecord | undefined {
      return db.view((tx) => {
        const v = tx.bucket('dynamicplugins')?.get('registry_state');
        return v === undefined ? undefined : (JSON.parse(v.toString('utf8')) as RegistryStateRecord);
      });
    },
    putRegistryState(s: RegistryStateRecord): void {
      db.update((tx) => tx.createBucketIfNotExists('dynamicplugins').put('registry_state', Buffer.from(JSON.stringify(s))));
    },
  };
  return { db: partial as unknown as ClientStateDB, real: false, close: () => db.close() };
}
