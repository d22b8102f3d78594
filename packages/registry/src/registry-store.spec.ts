// The RegistryStore conformance suite (@csiplug/registry/testing) against
// every store the registry is used with: the fake, and the default
// StateRegistryStore over a SQLite state file and over the in-memory state.
import { openClientState, type BoltClientStateDB } from '@csiplug/state';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { MalformedRegistryStateError, StateRegistryStore } from '.';
import { FakeRegistryStore, REGISTRY_STORE_CONFORMANCE, type RegistryStoreConformanceCase, type RegistryStoreSubject } from './testing';

const cases = REGISTRY_STORE_CONFORMANCE.map((c) => [c.name, c] as [string, RegistryStoreConformanceCase]);

describe('FakeRegistryStore conforms', () => {
  function subject(): RegistryStoreSubject {
    const store = new FakeRegistryStore();
    return {
      store,
      plant: (document) => (store.json = JSON.stringify(document)),
      plantText: (text) => (store.json = text),
      reopen: () => {
        const again = new FakeRegistryStore();
        again.json = store.json;
        return again;
      },
    };
  }
  test.each(cases)('%s', (_name, c) => c.run(subject()));
});

describe.each(['sqlite', 'memory'] as const)('StateRegistryStore over the %s state conforms', (backend) => {
  let dir: string;
  let file: string;
  let state: BoltClientStateDB;
  const open = () => (backend === 'sqlite' ? openClientState({ path: file }) : openClientState({ memory: true }));

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-registry-store-'));
    file = path.join(dir, 'state.db');
    state = open();
  });
  afterEach(() => {
    state.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  function subject(): RegistryStoreSubject {
    return {
      store: new StateRegistryStore(state),
      plant: (document) => state.putRegistryState(document),
      plantText: (text) => state.raw.update((tx) => tx.createBucketIfNotExists('dynamicplugins').put('registry_state', Buffer.from(text))),
      reopen: () => {
        // The in-memory state ends with its process: a restart there is a new store over the same state.
        if (backend === 'sqlite') {
          state.dispose();
          state = open();
        }
        return new StateRegistryStore(state);
      },
    };
  }
  test.each(cases)('%s', (_name, c) => c.run(subject()));

  test('a malformed document names where it is stored', () => {
    state.putRegistryState({ nope: true });
    expect(() => new StateRegistryStore(state).getRegistryState()).toThrow(MalformedRegistryStateError);
    expect(() => new StateRegistryStore(state).getRegistryState()).toThrow(
      'the stored registry state in the client state (dynamicplugins/registry_state) has no "plugins" object',
    );
  });
});
