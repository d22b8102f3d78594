// Tokens owned by @csiplug/registry. Each is a Symbol named like its type.
import type { PluginDispensers } from './plugin-dispensers';
import type { PluginRegistry } from './plugin-registry';
import type { RegistryStore } from './registry-store';

export type IPluginRegistry = PluginRegistry;
export const IPluginRegistry: unique symbol = Symbol('IPluginRegistry');

/** Where the registry keeps its document (registerRegistry: the client state). */
export type IRegistryStore = RegistryStore;
export const IRegistryStore: unique symbol = Symbol('IRegistryStore');

export type IPluginDispensers = PluginDispensers;
export const IPluginDispensers: unique symbol = Symbol('IPluginDispensers');

/** What a registry is configured with (bound by registerRegistry). */
export interface PluginRegistryConfig {
  /** Plugin types beyond csi-controller and csi-node. */
  readonly extraTypes?: readonly string[];
}

export type IPluginRegistryConfig = PluginRegistryConfig;
export const IPluginRegistryConfig: unique symbol = Symbol('IPluginRegistryConfig');
