// registerCsiManager binds the CSI manager's defaults. It expects the core
// bindings (registerCore), the CSI client
// factory (registerCsi) and the plugin registry (registerRegistry) to be
// bound by the time ICSIManager is first resolved. The manager registers the
// csi-node and csi-controller dispensers on the registry when it starts.
// csiManagerModule is the same as a Module: its start starts the manager
// (subscribe to the registry, resync), its stop disposes it.
import { bindDefault, declareTokenOwner, type Module } from '@csiplug/core';
import type { DependencyContainer } from 'tsyringe';
import type { CSIManager } from './csi-manager';
import { DefaultCSIManager } from './default-csi-manager';
import { ProcMountTable } from './mount-table';
import { ICSIManager, ICSIManagerConfig, IMountTable } from './tokens';

export interface CsiManagerOptions {
  /** The agent's data dir (plugin mount roots default to `<dataDir>/csi/...`). */
  dataDir: string;
  /** Resync with the registry on the heartbeat period (default true). */
  resync?: boolean;
}

export function registerCsiManager(container: DependencyContainer, options: CsiManagerOptions): void {
  bindDefault(container, ICSIManagerConfig, { useValue: Object.freeze({ dataDir: options.dataDir, resync: options.resync ?? true }) });
  bindDefault(container, IMountTable, { useFactory: () => new ProcMountTable() });
  bindDefault(container, ICSIManager, { useClass: DefaultCSIManager });
}

/** The CSI manager as a module: start subscribes it to the registry and resyncs; stop disposes it. */
export const csiManagerModule: Module<CsiManagerOptions> = {
  name: 'csimanager',
  register: (container, config) => registerCsiManager(container, config),
  start: (container) => container.resolve<CSIManager>(ICSIManager).start(),
  stop: (container) => container.resolve<CSIManager>(ICSIManager).dispose(),
};

declareTokenOwner({ name: 'csimanager', exportName: 'csiManagerModule', packageName: '@csiplug/csimanager' }, [
  ICSIManagerConfig,
  IMountTable,
  ICSIManager,
]);
