// A ClientStateDB fake holding only the registry state, stored as a JSON
// string so tests see exactly what a JSON-backed store would give back.
// Writes can be made to fail, and every write is counted.
import type { ClientStateDB, RegistryStateRecord } from '@csiplug/state';

export class FakeClientState {
  json: string | undefined;
  puts = 0;
  /** When set, the next putRegistryState throws it (once). */
  failNextPut: Error | undefined;
  /** When set, every putRegistryState throws it. */
  failPuts: Error | undefined;
  /** When set, getRegistryState throws it. */
  failGet: Error | undefined;

  constructor(initial?: RegistryStateRecord) {
    if (initial) this.json = JSON.stringify(initial);
  }

  getRegistryState(): RegistryStateRecord | undefined {
    if (this.failGet) throw this.failGet;
    return this.json === undefined ? undefined : (JSON.parse(this.json) as RegistryStateRecord);
  }

  putRegistryState(state: RegistryStateRecord): void {
    const fail = this.failNextPut ?? this.failPuts;
    this.failNextPut = undefined;
    if (fail) throw fail;
    this.json = JSON.stringify(state);
    this.puts++;
  }

  /** What is stored, parsed; undefined if nothing was written. */
  get stored(): RegistryStateRecord | undefined {
    return this.json === undefined ? undefined : (JSON.parse(this.json) as RegistryStateRecord);
  }

  /** Typed as the full contract for constructors; only the registry methods exist. */
  asDB(): ClientStateDB {
    return this as unknown as ClientStateDB;
  }
}
