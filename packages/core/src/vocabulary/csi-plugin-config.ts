// The `csi_plugin` block of a task: its checked shape, and the check, with
// the offending field named in the error. The jobspec reader runs the check
// on every task that serves a CSI plugin; the plugin supervisor hook
// (@csiplug/hooks) starts and watches the plugin by the checked shape.
import * as path from 'path';
import { assertPathSafeId } from '../ids';
import { parseDuration } from '../duration';
import { ValidationError } from '../errors';

/** The `csi_plugin` block of a task, after validation (see parseCsiPluginConfig). */
export interface CSIPluginConfig {
  id: string;
  type: 'node' | 'controller' | 'monolith';
  mountDir: string;
  stagePublishBaseDir: string;
  /** ms */
  healthTimeout: number;
}

export const CSI_PLUGIN_TYPES = ['node', 'controller', 'monolith'] as const;
const KNOWN_KEYS = new Set(['id', 'type', 'mount_dir', 'stage_publish_base_dir', 'health_timeout']);

function fail(where: string, field: string, why: string): never {
  throw new ValidationError(`${where}: csi_plugin.${field} ${why}`, `csi_plugin.${field}`);
}

/**
 * Validates a raw `csi_plugin` block (HCL/JSON field names) and fills the
 * defaults: mount_dir "/csi", stage_publish_base_dir "/local/csi",
 * health_timeout 30s. `where` names the task, e.g. `job "x" group "g" task "t"`.
 */
export function parseCsiPluginConfig(raw: unknown, where: string, defaultHealthTimeout = 30_000): CSIPluginConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new ValidationError(`${where}: csi_plugin must be a block`, 'csi_plugin');
  const block = raw as Record<string, unknown>;
  for (const key of Object.keys(block))
    if (!KNOWN_KEYS.has(key)) fail(where, key, `is not a known field (known: ${[...KNOWN_KEYS].join(', ')})`);

  const id = block.id;
  if (id === undefined || id === '') fail(where, 'id', 'is required');
  try {
    assertPathSafeId(id, 'plugin id');
  } catch (err) {
    fail(where, 'id', `is not usable: ${(err as Error).message}`);
  }
  const type = block.type;
  if (typeof type !== 'string' || !(CSI_PLUGIN_TYPES as readonly string[]).includes(type)) {
    fail(where, 'type', `must be one of ${CSI_PLUGIN_TYPES.join(', ')} (got ${JSON.stringify(type)})`);
  }
  const dir = (field: string, dflt: string): string => {
    const v = block[field] ?? dflt;
    if (typeof v !== 'string' || !v.startsWith('/')) fail(where, field, `must be an absolute path (got ${JSON.stringify(v)})`);
    if (v.includes('\0')) fail(where, field, 'may not contain NUL');
    return path.posix.normalize(v).replace(/(.)\/+$/, '$1');
  };
  const mountDir = dir('mount_dir', '/csi');
  const stagePublishBaseDir = dir('stage_publish_base_dir', '/local/csi');
  const rel = path.posix.relative(mountDir, stagePublishBaseDir);
  if (rel === '' || (!rel.startsWith('..') && !path.posix.isAbsolute(rel))) {
    fail(where, 'stage_publish_base_dir', `(${stagePublishBaseDir}) must not sit inside mount_dir (${mountDir})`);
  }
  let healthTimeout = defaultHealthTimeout;
  if (block.health_timeout !== undefined) {
    try {
      healthTimeout = parseDuration(block.health_timeout as string | number, `csi_plugin.health_timeout`);
    } catch (err) {
      fail(where, 'health_timeout', `is not a duration: ${(err as Error).message}`);
    }
    if (healthTimeout <= 0) fail(where, 'health_timeout', 'must be positive');
  }
  return { id: id as string, type: type as CSIPluginConfig['type'], mountDir, stagePublishBaseDir, healthTimeout };
}
