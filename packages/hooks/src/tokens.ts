// Tokens owned by @csiplug/hooks.
import type { CSIHookFactory } from './csi-hook';
import type { CSIPluginSupervisorFactory } from './csi-plugin-supervisor-hook';
import type { PendingUnmounts } from './pending-unmounts';
import type { VolumeClaimer } from './volume-claimer';

/** Where hooks keep their files: the agent's data dir. */
export interface HooksConfig {
  readonly dataDir: string;
}
export type IHooksConfig = HooksConfig;
export const IHooksConfig: unique symbol = Symbol('IHooksConfig');

/** Claims volumes for allocs; the agent's volume catalog implements it. */
export type IVolumeClaimer = VolumeClaimer;
export const IVolumeClaimer: unique symbol = Symbol('IVolumeClaimer');

export type ICSIPluginSupervisorFactory = CSIPluginSupervisorFactory;
export const ICSIPluginSupervisorFactory: unique symbol = Symbol('ICSIPluginSupervisorFactory');

export type ICSIHookFactory = CSIHookFactory;
export const ICSIHookFactory: unique symbol = Symbol('ICSIHookFactory');

/** The agent-wide queue of unmounts retried in the background. */
export type IPendingUnmounts = PendingUnmounts;
export const IPendingUnmounts: unique symbol = Symbol('IPendingUnmounts');
