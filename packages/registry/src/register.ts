// registerRegistry binds the registry's defaults. It expects the core
// bindings (registerCore: IClock, ILogger, ITimeoutPolicy) and, unless a
// deployment binds its own IRegistryStore, the client state's registry store
// (IRegistryStateStore, bound by @csiplug/state's registerState) to be bound by the time the registry is first
// resolved. registryModule is the same as a Module: it makes the registry
// (which restores the registrations a previous agent saved) when it starts,
// and disposes it when it stops.
import { bindDefault, declareTokenOwner, type Module } from '@csiplug/core';
import { IRegistryStateStore } from '@csiplug/state';
import type { DependencyContainer } from 'tsyringe';
import { DynamicPluginRegistry } from './dynamic-plugin-registry';
import { type PluginDispenser, PluginDispenserTable } from './plugin-dispensers';
import type { PluginRegistry } from './plugin-registry';
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
  bindDefault(container, IRegistryStore, {
    useFactory: (c) => new StateRegistryStore(c.resolve<IRegistryStateStore>(IRegistryStateStore)),
  });
  bindDefault(container, IPluginRegistry, { useClass: DynamicPluginRegistry });
}

/** The plugin registry as a module: start makes it (restoring what was saved), stop disposes it. */
export const registryModule: Module<RegistryOptions> = {
  name: 'registry',
  register: (container, config) => registerRegistry(container, config),
  start: (container) => {
    container.resolve<PluginRegistry>(IPluginRegistry);
  },
  stop: (container) => container.resolve<PluginRegistry>(IPluginRegistry).dispose(),
};

declareTokenOwner({ name: 'registry', exportName: 'registryModule', packageName: '@csiplug/registry' }, [
  IPluginRegistryConfig,
  IPluginDispensers,
  IRegistryStore,
  IPluginRegistry,
]);
