// registerHooks binds the hook factories. It expects core, state, csi,
// registry, csimanager and volumes (the volume reconciler) to be registered.
// hooksModule is the same registration as a Module: the factories own
// nothing (each hook belongs to its task runner, which detaches or stops it),
// so there is nothing to start or stop.
import { bindDefault, declareTokenOwner, type Module } from '@csiplug/core';
import type { DependencyContainer } from 'tsyringe';
import { CSIHookFactory } from './csi-hook';
import { CSIPluginSupervisorFactory } from './csi-plugin-supervisor-hook';
import { ICSIHookFactory, ICSIPluginSupervisorFactory, IHooksConfig } from './tokens';

export interface HooksOptions {
  dataDir: string;
}

export function registerHooks(container: DependencyContainer, options: HooksOptions): void {
  bindDefault(container, IHooksConfig, { useValue: Object.freeze({ dataDir: options.dataDir }) });
  bindDefault(container, ICSIPluginSupervisorFactory, { useClass: CSIPluginSupervisorFactory });
  bindDefault(container, ICSIHookFactory, { useClass: CSIHookFactory });
}

/** The hook factories as a module (registration only). */
export const hooksModule: Module<HooksOptions> = {
  name: 'hooks',
  register: (container, config) => registerHooks(container, config),
};

declareTokenOwner({ name: 'hooks', exportName: 'hooksModule', packageName: '@csiplug/hooks' }, [
  IHooksConfig,
  ICSIPluginSupervisorFactory,
  ICSIHookFactory,
]);
