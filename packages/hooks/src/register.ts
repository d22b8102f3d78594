// registerHooks binds the hook factories and the pending-unmount queue. It
// expects core, state, csi, registry and csimanager to be registered, and an
// IVolumeClaimer (the agent's volume catalog, or a deployment's own).
import { bindDefault } from '@csiplug/core';
import type { DependencyContainer } from 'tsyringe';
import { CSIHookFactory } from './csi-hook';
import { CSIPluginSupervisorFactory } from './csi-plugin-supervisor-hook';
import { PendingUnmounts } from './pending-unmounts';
import { ICSIHookFactory, ICSIPluginSupervisorFactory, IHooksConfig, IPendingUnmounts } from './tokens';

export interface HooksOptions {
  dataDir: string;
}

export function registerHooks(container: DependencyContainer, options: HooksOptions): void {
  bindDefault(container, IHooksConfig, { useValue: Object.freeze({ dataDir: options.dataDir }) });
  bindDefault(container, IPendingUnmounts, { useClass: PendingUnmounts });
  bindDefault(container, ICSIPluginSupervisorFactory, { useClass: CSIPluginSupervisorFactory });
  bindDefault(container, ICSIHookFactory, { useClass: CSIHookFactory });
}
