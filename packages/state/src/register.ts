// registerState binds IClientStateDB: the SQLite file under the data dir,
// or the in-memory twin, as the agent's `state { backend = … }` says; and
// the narrow tokens (IRegistryStateStore, IAllocStateStore,
// IVolumeStateStore) to whatever IClientStateDB resolves to, a deployment's
// own binding included. stateModule is the same as a Module: the state is
// opened when the module starts (the agent locks the data dir in between)
// and disposed when it stops.
import { bindDefault, declareTokenOwner, IClock, ILogger, ValidationError } from '@csiplug/core';
import type { Clock, Logger, Module } from '@csiplug/core';
import * as path from 'path';
import type { DependencyContainer } from 'tsyringe';
import type { ClientStateDB } from './client-state';
import { openClientState } from './client-state-db';
import { IAllocStateStore, IClientStateDB, IRegistryStateStore, IVolumeStateStore } from './tokens';

export type StateBackend = 'sqlite' | 'memory';

export interface StateOptions {
  /** Default 'sqlite'. */
  backend?: StateBackend;
  /** Required for 'sqlite': the state lives at `<dataDir>/state.db`. */
  dataDir?: string;
  /** How long to wait for another agent to let go of the file, in ms (default 0). */
  timeout?: number;
  noSync?: boolean;
}

/** The state file under a data dir. */
export function stateFilePath(dataDir: string): string {
  return path.join(dataDir, 'state.db');
}

export function registerState(container: DependencyContainer, options: StateOptions = {}): void {
  const backend = options.backend ?? 'sqlite';
  if (backend !== 'sqlite' && backend !== 'memory') {
    throw new ValidationError(`state.backend: unknown backend "${String(backend)}"; known: sqlite, memory`, 'backend');
  }
  if (backend === 'sqlite' && !options.dataDir) throw new ValidationError('state: the sqlite backend needs a data dir', 'dataDir');
  bindDefault(container, IClientStateDB, {
    // Opened on first resolve, so a deployment's own IClock/ILogger are used.
    useFactory: (c) => {
      const clock = c.isRegistered(IClock, true) ? c.resolve<Clock>(IClock) : undefined;
      const logger = c.isRegistered(ILogger, true) ? c.resolve<Logger>(ILogger).child({ component: 'state' }) : undefined;
      return backend === 'memory'
        ? openClientState({ memory: true, clock, logger })
        : openClientState({ path: stateFilePath(options.dataDir!), timeout: options.timeout, noSync: options.noSync, clock, logger });
    },
  });
  bindStateStores(container);
}

/**
 * Binds the narrow stores (registry, allocs, volumes) to whatever
 * IClientStateDB resolves to — for a container whose client state was bound
 * by hand (tests, a deployment's own store). registerState calls it.
 */
export function bindStateStores(container: DependencyContainer): void {
  bindDefault(container, IRegistryStateStore, { useFactory: (c) => c.resolve<IClientStateDB>(IClientStateDB) });
  bindDefault(container, IAllocStateStore, { useFactory: (c) => c.resolve<IClientStateDB>(IClientStateDB) });
  bindDefault(container, IVolumeStateStore, { useFactory: (c) => c.resolve<IClientStateDB>(IClientStateDB) });
}

/**
 * The client state as a module. Registration opens nothing; start opens the
 * state (after whatever the owner does first, e.g. lock the data dir); stop
 * disposes it (whatever IClientStateDB resolves to, a deployment's own too).
 */
export const stateModule: Module<StateOptions> = {
  name: 'state',
  register: (container, config) => registerState(container, config),
  start: (container) => {
    container.resolve<ClientStateDB>(IClientStateDB);
  },
  stop: (container) => container.resolve<ClientStateDB>(IClientStateDB).dispose(),
};

declareTokenOwner({ name: 'state', exportName: 'stateModule', packageName: '@csiplug/state' }, [
  IClientStateDB,
  IRegistryStateStore,
  IAllocStateStore,
  IVolumeStateStore,
]);
