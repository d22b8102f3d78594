// Tokens owned by @csiplug/csimanager. Each is a Symbol named like its type.
import type { CSIManager } from './csi-manager';
import type { MountTable } from './mount-table';

export type ICSIManager = CSIManager;
export const ICSIManager: unique symbol = Symbol('ICSIManager');

export type IMountTable = MountTable;
export const IMountTable: unique symbol = Symbol('IMountTable');

/** What a CSI manager is configured with (bound by registerCsiManager). */
export interface CSIManagerConfig {
  /** The agent's data dir; plugin mount roots default to `<dataDir>/csi/<node|controller|monolith>/<plugin>`. */
  readonly dataDir: string;
  /**
   * Whether to resync with the registry on the heartbeat strategy's
   * fingerprint period (default true). Registry events keep instances
   * current either way; the resync is the safety net.
   */
  readonly resync?: boolean;
}

export type ICSIManagerConfig = CSIManagerConfig;
export const ICSIManagerConfig: unique symbol = Symbol('ICSIManagerConfig');
