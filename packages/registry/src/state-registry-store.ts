// StateRegistryStore: the default RegistryStore, the registry document in the
// client state (@csiplug/state's RegistryStateStore: bucket dynamicplugins,
// key registry_state). The state stores JSON and knows nothing of the
// document; this adapter checks what it reads back.
import type { RegistryStateStore } from '@csiplug/state';
import { checkRegistryDocument, type RegistryStateRecord, type RegistryStore, type StoredRegistryState } from './registry-store';

/** Where the document lives, for error messages. */
const WHERE = 'the client state (dynamicplugins/registry_state)';

export class StateRegistryStore implements RegistryStore {
  constructor(private readonly state: RegistryStateStore) {}

  getRegistryState(): StoredRegistryState | undefined {
    return checkRegistryDocument(this.state.getRegistryState(), WHERE);
  }

  putRegistryState(state: RegistryStateRecord): void {
    this.state.putRegistryState(state);
  }
}
