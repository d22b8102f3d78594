// The conformance suite of RegistryStore: what the registry relies on from
// any store it is given. Each case is a plain function that throws
// (node:assert) when the store misbehaves, so it runs under any test runner:
//   test.each(REGISTRY_STORE_CONFORMANCE.map((c) => [c.name, c]))('%s', (_, c) => c.run(makeSubject()));
// registry-store.spec.ts runs it against FakeRegistryStore and against
// StateRegistryStore over a SQLite file and over the in-memory state.
import * as assert from 'node:assert/strict';
import {
  MalformedRegistryStateError,
  type PluginRegistrationRecord,
  type RegistryStateRecord,
  type RegistryStore,
} from '../registry-store';

/** A store under test, with ways to reach beneath it. */
export interface RegistryStoreSubject {
  readonly store: RegistryStore;
  /** Stores `document` beneath the store, as JSON, as another writer might have. */
  plant(document: unknown): void;
  /** Stores `text` beneath the store as it is (to plant a document that is not JSON). */
  plantText(text: string): void;
  /** A new store over what has been written so far (an agent restart); a case uses only that store after it. */
  reopen(): RegistryStore;
}

export interface RegistryStoreConformanceCase {
  readonly name: string;
  run(subject: RegistryStoreSubject): void;
}

const registration = (type: string, name: string, allocId: string, options: Record<string, string> = {}): PluginRegistrationRecord => ({
  type,
  name,
  version: '1.0.0',
  allocId,
  socketPath: `/var/lib/csiplug/plugins/${allocId}/csi.sock`,
  options,
});

/** A document with several types, names and lists, and a name that is an object property elsewhere. */
function sampleDocument(): RegistryStateRecord {
  const nodes: Record<string, PluginRegistrationRecord[]> = {
    hostpath: [registration('csi-node', 'hostpath', 'alloc-2', { MountPoint: '/csi' }), registration('csi-node', 'hostpath', 'alloc-1')],
  };
  // An own "__proto__" key, as the registry's prototype-free objects make it.
  Object.defineProperty(nodes, '__proto__', {
    value: [registration('csi-node', '__proto__', 'alloc-3')],
    enumerable: true,
    writable: true,
    configurable: true,
  });
  return { plugins: { 'csi-node': nodes, 'csi-controller': { hostpath: [registration('csi-controller', 'hostpath', 'alloc-2')] } } };
}

export const REGISTRY_STORE_CONFORMANCE: readonly RegistryStoreConformanceCase[] = [
  {
    name: 'an empty store reads as undefined',
    run({ store, reopen }) {
      assert.equal(store.getRegistryState(), undefined);
      assert.equal(reopen().getRegistryState(), undefined);
    },
  },
  {
    name: 'a put is read back whole, every list in order, "__proto__" a name like any other',
    run({ store, reopen }) {
      const doc = sampleDocument();
      store.putRegistryState(doc);
      assert.equal(JSON.stringify(store.getRegistryState()), JSON.stringify(doc));
      const again = reopen().getRegistryState();
      assert.equal(JSON.stringify(again), JSON.stringify(doc));
      assert.deepEqual(Object.keys((again!.plugins['csi-node'] ?? {}) as object), ['hostpath', '__proto__']);
    },
  },
  {
    name: 'a put replaces the whole document',
    run({ store, reopen }) {
      store.putRegistryState(sampleDocument());
      const next: RegistryStateRecord = { plugins: { 'csi-node': { other: [registration('csi-node', 'other', 'alloc-9')] } } };
      store.putRegistryState(next);
      assert.deepEqual(store.getRegistryState(), next);
      store.putRegistryState({ plugins: {} });
      assert.deepEqual(reopen().getRegistryState(), { plugins: {} });
    },
  },
  {
    name: 'what a read returns is the reader’s own: changing it changes nothing stored',
    run({ store }) {
      store.putRegistryState(sampleDocument());
      const first = store.getRegistryState() as RegistryStateRecord;
      first.plugins['csi-node'] = {};
      delete first.plugins['csi-controller'];
      assert.equal(JSON.stringify(store.getRegistryState()), JSON.stringify(sampleDocument()));
    },
  },
  {
    name: 'a stored null reads as no document',
    run({ plant, store }) {
      plant(null);
      assert.equal(store.getRegistryState(), undefined);
    },
  },
  {
    name: 'a document without a "plugins" object is refused with MalformedRegistryStateError',
    run({ plant, store }) {
      for (const document of [{ nope: true }, { plugins: null }, { plugins: 'csi-node' }, [], 'text', 42]) {
        plant(document);
        assert.throws(
          () => store.getRegistryState(),
          (err: unknown) =>
            err instanceof MalformedRegistryStateError &&
            err.code === 'EREGISTRY_STATE_MALFORMED' &&
            /has no "plugins" object/.test(err.message),
          `document ${JSON.stringify(document)}`,
        );
      }
    },
  },
  {
    name: 'a document that is not JSON cannot be read: get throws',
    run({ plantText, store }) {
      plantText('{"plugins": {"csi-node": tru');
      assert.throws(() => store.getRegistryState());
    },
  },
  {
    name: 'what is inside "plugins" is passed through as stored: the registry checks each registration',
    run({ plant, store }) {
      const document = { plugins: { 'csi-node': { broken: 'not a list', ok: [{ allocId: 'a' }] }, gpu: 5 } };
      plant(document);
      assert.deepEqual(store.getRegistryState(), document);
    },
  },
];
