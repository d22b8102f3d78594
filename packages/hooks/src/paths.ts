// Where a plugin task's files live under the agent's data dir (ARCHITECTURE.md, "What is kept where").
import { assertPathSafeId } from '@csiplug/core';
import * as path from 'path';
import type { CSIPluginConfig } from './hook';

export const CSI_SOCKET_NAME = 'csi.sock';

/** `<data_dir>/plugins/<alloc id>` — the plugin's socket dir (0700). */
export function pluginSocketDir(dataDir: string, allocId: string): string {
  assertPathSafeId(allocId, 'alloc id');
  return path.join(dataDir, 'plugins', allocId);
}

export function pluginSocketPath(dataDir: string, allocId: string): string {
  return path.join(pluginSocketDir(dataDir, allocId), CSI_SOCKET_NAME);
}

/** `<data_dir>/csi/<node|controller|monolith>/<plugin id>` — staging and per-alloc mounts go below. */
export function pluginMountRoot(dataDir: string, config: Pick<CSIPluginConfig, 'type' | 'id'>): string {
  assertPathSafeId(config.id, 'plugin id');
  return path.join(dataDir, 'csi', config.type, config.id);
}
