// Tokens owned by @csiplug/registry. Each is a Symbol named like its type.
import type { PluginDispensers } from './plugin-dispensers';
import type { PluginRegistry } from './plugin-registry';

export type IPluginRegistry = PluginRegistry;
export const IPluginRegistry: unique symbol = Symbol('IPluginRegistry');

export type IPluginDispensers = PluginDispensers;
export const IPluginDispensers: unique symbol = Symbol('IPluginDispensers');

/** What a registry is configured with (bound by registerRegistry). */
export interface PluginRegistryConfig {
  /** Plugin types beyond csi-controller and csi-node. */
  readonly extraTypes?: readonly string[];
}

export type IPluginRegistryConfig = PluginRegistryConfig;
export const IPluginRegistryConfig: unique symbol = Symbol('IPluginRegistryConfig');
