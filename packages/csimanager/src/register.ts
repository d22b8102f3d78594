// registerCsiManager binds the CSI manager's defaults. It expects the core
// bindings (registerCore), the CSI client
// factory (registerCsi) and the plugin registry (registerRegistry) to be
// bound by the time ICSIManager is first resolved. The manager registers the
// csi-node and csi-controller dispensers on the registry when it starts.
import { bindDefault } from '@csiplug/core';
import type { DependencyContainer } from 'tsyringe';
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
