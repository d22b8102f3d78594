// Tokens owned by @csiplug/hooks.
import type { CSIHookFactory } from './csi-hook';
import type { CSIPluginSupervisorFactory } from './csi-plugin-supervisor-hook';

/** Where hooks keep their files: the agent's data dir. */
export { IHooksConfig, type HooksConfig } from './hooks-config';

/** Claims volumes for allocs; the volume catalog implements it. Owned by @csiplug/volumes, re-exported here. */
export { IVolumeClaimer } from '@csiplug/volumes';

export type ICSIPluginSupervisorFactory = CSIPluginSupervisorFactory;
export const ICSIPluginSupervisorFactory: unique symbol = Symbol('ICSIPluginSupervisorFactory');

export type ICSIHookFactory = CSIHookFactory;
export const ICSIHookFactory: unique symbol = Symbol('ICSIHookFactory');
