// FakeRegistryStore: a RegistryStore in memory for tests of the registry and
// of what builds on it. It keeps the document as a JSON string, so a test sees
// exactly what a JSON-backed store gives back, and makes the same check on
// reads as the real store (it passes the same conformance suite). Writes can
// be made to fail, and every write is counted.
import { checkRegistryDocument, type RegistryStateRecord, type RegistryStore, type StoredRegistryState } from '../registry-store';

export class FakeRegistryStore implements RegistryStore {
  /** The stored document as JSON; undefined if nothing was written. Tests may set it (to plant a document). */
  json: string | undefined;
  /** How many writes succeeded. */
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

  getRegistryState(): StoredRegistryState | undefined {
    if (this.failGet) throw this.failGet;
    return checkRegistryDocument(this.json === undefined ? undefined : JSON.parse(this.json), 'the fake registry store');
  }

  putRegistryState(state: RegistryStateRecord): void {
    const fail = this.failNextPut ?? this.failPuts;
    this.failNextPut = undefined;
    if (fail) throw fail;
    this.json = JSON.stringify(state);
    this.puts++;
  }

  /** What is stored, parsed without any check; undefined if nothing was written. */
  get stored(): RegistryStateRecord | undefined {
    return this.json === undefined ? undefined : (JSON.parse(this.json) as RegistryStateRecord);
  }
}
