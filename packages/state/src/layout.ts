// The client state layout of ARCHITECTURE.md ("What is kept where"): bucket and key
// names, the schema version, and JSON encoding. Shared by ClientStateDB and
// the migrations so both agree on every name.
import { ErrDecode } from './errors';
import type { Tx } from './tx';

/** The schema version this build writes. */
export const CLIENT_STATE_SCHEMA_VERSION = 2;

export const Layout = {
  meta: 'meta',
  metaVersion: 'version',
  metaUpgraded: 'upgraded',
  dynamicPlugins: 'dynamicplugins',
  registryState: 'registry_state',
  allocations: 'allocations',
  allocKey: 'alloc',
  volumesKey: 'volumes',
  taskPrefix: 'task-',
  taskHandle: 'handle',
  taskState: 'state',
  csi: 'csi',
  usage: 'usage',
  pending: 'pending',
  /** csi/mounts: the volume reconciler's records (schema 2). */
  mounts: 'mounts',
  /** csi/volume-ops: the volume catalog's create / expand / delete intents, one per volume, while the plugin call is under way. */
  volumeOps: 'volume-ops',
  volumeCatalog: 'volumes',
} as const;

export function encode(value: unknown): Buffer {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError(`cannot store ${typeof value} as JSON`);
  return Buffer.from(text, 'utf8');
}

export function decode<T>(raw: Buffer, where: string): T {
  try {
    return JSON.parse(raw.toString('utf8')) as T;
  } catch (err) {
    throw new ErrDecode(where, err);
  }
}

/** Creates every top-level bucket of the current layout that is missing. */
export function ensureLayout(tx: Tx): void {
  tx.createBucketIfNotExists(Layout.meta);
  tx.createBucketIfNotExists(Layout.dynamicPlugins);
  tx.createBucketIfNotExists(Layout.allocations);
  const csi = tx.createBucketIfNotExists(Layout.csi);
  csi.createBucketIfNotExists(Layout.usage);
  csi.createBucketIfNotExists(Layout.pending);
  csi.createBucketIfNotExists(Layout.mounts);
  tx.createBucketIfNotExists(Layout.volumeCatalog);
}

/** What the store says about its schema: 'empty' for a new store, 0 for one written before versions existed. */
export function readSchemaVersion(tx: Tx): number | 'empty' | { unknown: unknown } {
  const meta = tx.bucket(Layout.meta);
  if (!meta) {
    let any = false;
    tx.forEach(() => (any = true));
    return any ? 0 : 'empty';
  }
  const raw = meta.get(Layout.metaVersion);
  if (!raw) return { unknown: undefined };
  let value: unknown;
  try {
    value = JSON.parse(raw.toString('utf8'));
  } catch {
    return { unknown: raw.toString('utf8') };
  }
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : { unknown: value };
}

export function writeSchemaVersion(tx: Tx, version: number, now: number): void {
  const meta = tx.createBucketIfNotExists(Layout.meta);
  meta.put(Layout.metaVersion, encode(version));
  meta.put(Layout.metaUpgraded, encode(new Date(now).toISOString()));
}
