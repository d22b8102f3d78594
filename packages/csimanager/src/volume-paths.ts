// The paths of a volume on a plugin, from ARCHITECTURE.md ("What is kept where"):
//   <root>/staging/<volume>/<usage>
//   <root>/per-alloc/<alloc>/<volume>/<usage>
// once on the host and once as the plugin sees them. Ids are checked before
// they become path components.
import * as path from 'node:path';
import { assertPathSafeId } from '@csiplug/core';
import { PER_ALLOC_DIR_NAME, type PluginMountRoots, STAGING_DIR_NAME } from './plugin-options';
import { type UsageOptions, usageToFS } from './usage';

export interface VolumePaths {
  hostStagingPath: string;
  pluginStagingPath: string;
  /** The parent of the target; the CO creates it, the plugin creates the target. */
  hostAllocVolumeDir: string;
  hostTargetPath: string;
  pluginTargetPath: string;
}

export function volumePaths(roots: PluginMountRoots, volumeId: string, allocId: string, usage: UsageOptions): VolumePaths {
  assertPathSafeId(volumeId, 'volume id');
  assertPathSafeId(allocId, 'alloc id');
  const u = usageToFS(usage);
  return {
    hostStagingPath: path.join(roots.hostRoot, STAGING_DIR_NAME, volumeId, u),
    pluginStagingPath: path.join(roots.pluginRoot, STAGING_DIR_NAME, volumeId, u),
    hostAllocVolumeDir: path.join(roots.hostRoot, PER_ALLOC_DIR_NAME, allocId, volumeId),
    hostTargetPath: path.join(roots.hostRoot, PER_ALLOC_DIR_NAME, allocId, volumeId, u),
    pluginTargetPath: path.join(roots.pluginRoot, PER_ALLOC_DIR_NAME, allocId, volumeId, u),
  };
}
