// Tokens owned by @csiplug/hooks.
import type { AllocHook, CSIPluginConfig, TaskHook } from './hook';

/** Where hooks keep their files: the agent's data dir. */
export { IHooksConfig, type HooksConfig } from './hooks-config';

/** Claims volumes for allocs; the volume catalog implements it. Owned by @csiplug/volumes, re-exported here. */
export { IVolumeClaimer } from '@csiplug/volumes';

/** Makes the csi_plugin_supervisor hook of a plugin task (CSIPluginSupervisorFactory by default). */
export interface ICSIPluginSupervisorFactory {
  create(plugin: CSIPluginConfig): TaskHook;
}
export const ICSIPluginSupervisorFactory: unique symbol = Symbol('ICSIPluginSupervisorFactory');

/** Makes the csi hook of an alloc with CSI volumes (CSIHookFactory by default). */
export interface ICSIHookFactory {
  create(): AllocHook;
}
export const ICSIHookFactory: unique symbol = Symbol('ICSIHookFactory');
