// registerRegistry binds the registry's defaults. It expects the core
// bindings (registerCore: IClock, ILogger, ITimeoutPolicy) and, unless a
// deployment binds its own IRegistryStore, a client state (IClientStateDB,
// from @csiplug/state) to be bound by the time the registry is first
// resolved.
import { bindDefault } from '@csiplug/core';
import { IClientStateDB } from '@csiplug/state';
import type { DependencyContainer } from 'tsyringe';
import { DynamicPluginRegistry } from './dynamic-plugin-registry';
import { PluginDispenser, PluginDispenserTable } from './plugin-dispensers';
import { StateRegistryStore } from './state-registry-store';
import { IPluginDispensers, IPluginRegistry, IPluginRegistryConfig, IRegistryStore } from './tokens';

export interface RegistryOptions {
  /** Plugin types beyond csi-controller and csi-node. */
  types?: readonly string[];
  /** Dispensers to start with, by type (more can be added with registerDispenser). */
  dispensers?: Record<string, PluginDispenser>;
}

export function registerRegistry(container: DependencyContainer, options: RegistryOptions = {}): void {
  bindDefault(container, IPluginRegistryConfig, { useValue: Object.freeze({ extraTypes: Object.freeze([...(options.types ?? [])]) }) });
  bindDefault(container, IPluginDispensers, { useFactory: () => new PluginDispenserTable(options.dispensers) });
  bindDefault(container, IRegistryStore, { useFactory: (c) => new StateRegistryStore(c.resolve<IClientStateDB>(IClientStateDB)) });
  bindDefault(container, IPluginRegistry, { useClass: DynamicPluginRegistry });
}
