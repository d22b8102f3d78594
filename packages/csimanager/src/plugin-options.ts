// The registration options the CSI manager reads. The plugin supervisor hook
// sets them when it registers a plugin; each key is exported so both sides
// spell it the same way.
import * as path from 'node:path';
import { assertPathSafeId } from '@csiplug/core';
import type { RegisteredPlugin } from '@csiplug/registry';
import { PluginOptionsError } from './errors';

/**
 * Host directory under which the plugin's `staging/` and `per-alloc/` trees
 * live: `<dataDir>/csi/<node|controller|monolith>/<plugin id>`. Absolute.
 * Defaults to exactly that, built from the data dir and `pluginType`.
 */
export const PLUGIN_OPTION_STAGE_PUBLISH_BASE = 'stagePublishBaseDir';
/** `node`, `controller` or `monolith`: the path component under `<dataDir>/csi/`. Defaults to the registration's role (`node` for csi-node, `controller` for csi-controller). */
export const PLUGIN_OPTION_PLUGIN_TYPE = 'pluginType';
/**
 * Where the plugin itself sees the stage/publish base dir (for plugins in
 * their own filesystem namespace). Absolute; defaults to the host dir, as
 * tasks run without filesystem isolation.
 */
export const PLUGIN_OPTION_CONTAINER_MOUNT_POINT = 'containerMountPoint';

export type PluginDeployment = 'node' | 'controller' | 'monolith';
export const PLUGIN_DEPLOYMENTS: readonly PluginDeployment[] = Object.freeze(['node', 'controller', 'monolith'] as const);

export const STAGING_DIR_NAME = 'staging';
export const PER_ALLOC_DIR_NAME = 'per-alloc';

/** Where a plugin's volumes go, on the host and as the plugin sees it. */
export interface PluginMountRoots {
  deployment: PluginDeployment;
  /** Host path of the stage/publish base dir. */
  hostRoot: string;
  /** The same dir as the plugin sees it. */
  pluginRoot: string;
}

function absolute(value: string, key: string, plugin: RegisteredPlugin): string {
  if (!path.isAbsolute(value) || value.includes('\0')) {
    throw new PluginOptionsError(
      `plugin "${plugin.name}" (alloc ${plugin.allocId}): option ${key}="${value}" must be an absolute path; fix the plugin supervisor's registration`,
    );
  }
  return path.normalize(value);
}

/** Reads the mount roots of a registration (see the PLUGIN_OPTION_* keys). */
export function pluginMountRoots(plugin: RegisteredPlugin, dataDir: string): PluginMountRoots {
  const o = plugin.options ?? {};
  const fallback: PluginDeployment = plugin.type === 'csi-controller' ? 'controller' : 'node';
  const deployment = (o[PLUGIN_OPTION_PLUGIN_TYPE] ?? fallback) as PluginDeployment;
  if (!PLUGIN_DEPLOYMENTS.includes(deployment)) {
    throw new PluginOptionsError(
      `plugin "${plugin.name}" (alloc ${plugin.allocId}): option ${PLUGIN_OPTION_PLUGIN_TYPE}="${deployment}" is not one of ${PLUGIN_DEPLOYMENTS.join(', ')}`,
    );
  }
  assertPathSafeId(plugin.name, 'plugin id');
  const base = o[PLUGIN_OPTION_STAGE_PUBLISH_BASE];
  const hostRoot =
    base !== undefined ? absolute(base, PLUGIN_OPTION_STAGE_PUBLISH_BASE, plugin) : path.join(dataDir, 'csi', deployment, plugin.name);
  const cmp = o[PLUGIN_OPTION_CONTAINER_MOUNT_POINT];
  const pluginRoot = cmp !== undefined ? absolute(cmp, PLUGIN_OPTION_CONTAINER_MOUNT_POINT, plugin) : hostRoot;
  return { deployment, hostRoot, pluginRoot };
}
