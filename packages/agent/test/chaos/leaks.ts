// What a fault-suite round may leave behind, counted after every job was
// stopped: mounts under the round's dir, processes under it (executors,
// tasks, plugins), claims the catalog still holds (and controller
// attachments the plugin still records), allocs that never reached a
// terminal state, mount records in the client state that outlived what
// they describe, and volumes the catalog and the plugin disagree on (one
// side has it and the other not, or their capacities differ) or whose
// create / expand / delete intent was never settled. The counts are read from the kernel (/proc), the agent's
// API and — once the agent has exited — its state file (ChaosAgent.countLeaks).
import { openClientState } from '@csiplug/state';
import * as fs from 'fs';
import * as path from 'path';

export interface LeakCounts {
  mounts: number;
  processes: number;
  claims: number;
  allocs: number;
  records: number;
  volumes: number;
}

export const LEAK_KINDS: readonly (keyof LeakCounts)[] = ['mounts', 'processes', 'claims', 'allocs', 'records', 'volumes'];

export function noLeaks(): LeakCounts {
  return { mounts: 0, processes: 0, claims: 0, allocs: 0, records: 0, volumes: 0 };
}

export function totalLeaks(l: LeakCounts): number {
  return LEAK_KINDS.reduce((n, k) => n + l[k], 0);
}

export function addLeaks(into: LeakCounts, more: LeakCounts): LeakCounts {
  for (const k of LEAK_KINDS) into[k] += more[k];
  return into;
}

/** "0", or the kinds that leaked: "mounts 2, claims 1". */
export function formatLeaks(l: LeakCounts): string {
  const parts = LEAK_KINDS.filter((k) => l[k] > 0).map((k) => `${k} ${l[k]}`);
  return parts.length ? parts.join(', ') : '0';
}

function readText(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/**
 * Pids of the processes that belong under `root`: their command line or
 * environment names it, or their working dir is in it (executors name their
 * spec file, tasks get their task dir in the environment and as cwd).
 */
export function processesUnder(root: string, except: readonly number[] = []): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (except.includes(pid) || pid === process.pid) continue;
    const dir = path.join('/proc', entry);
    let cwd = '';
    try {
      cwd = fs.readlinkSync(path.join(dir, 'cwd'));
    } catch {
      // gone, or a kernel thread
    }
    const stat = readText(path.join(dir, 'stat'));
    // A zombie is dead already; its parent reaps it.
    if (/\) Z /.test(stat)) continue;
    if (
      cwd === root ||
      cwd.startsWith(`${root}/`) ||
      readText(path.join(dir, 'cmdline')).includes(root) ||
      readText(path.join(dir, 'environ')).includes(root)
    )
      pids.push(pid);
  }
  return pids;
}

/** Controller attachments the hostpath plugin still records in its state dir. */
export function attachmentsLeft(pluginState: string): string[] {
  const text = readText(path.join(pluginState, 'attachments.json'));
  if (!text) return [];
  const doc = JSON.parse(text) as Record<string, string[]>;
  return Object.entries(doc).flatMap(([volume, nodes]) => nodes.map((n) => `${volume}@${n}`));
}

interface StoredMountRecord {
  allocId: string;
  name: string;
  desired: string;
  claimed: boolean;
  staged: boolean;
  published: boolean;
  targetPath?: string;
}

interface StoredVolume {
  id: string;
  claims: { allocId: string }[];
  controllerPublished?: Record<string, string>;
  publishing?: Record<string, string>;
}

/** What the client state holds once the agent is gone: mount records, and claims or controller publishes the catalog keeps. */
export function readStateLeftovers(dataDir: string): { records: string[]; claims: string[] } {
  const file = path.join(dataDir, 'state.db');
  if (!fs.existsSync(file)) return { records: [], claims: [] };
  const db = openClientState({ path: file });
  try {
    const { records, failures } = db.listVolumeMounts<StoredMountRecord>();
    const left = records.map(
      ({ key, record: r }) =>
        `record ${key}: desired ${r.desired}, claimed ${r.claimed}, staged ${r.staged}, published ${r.published}${r.targetPath ? ` at ${r.targetPath}` : ''}`,
    );
    for (const f of failures) left.push(`unreadable record ${f.key}`);
    const claims = db
      .listVolumes<StoredVolume>()
      .flatMap((v) => [
        ...v.claims.map((c) => `claim of ${v.id} by ${c.allocId}`),
        ...Object.keys(v.controllerPublished ?? {}).map((a) => `controller publish of ${v.id} for ${a}`),
        ...Object.keys(v.publishing ?? {}).map((a) => `controller publish under way of ${v.id} for ${a}`),
      ]);
    return { records: left, claims };
  } finally {
    db.dispose();
  }
}

export interface LeakReport {
  leaks: LeakCounts;
  details: string[];
}

interface StoredCatalogVolume {
  id: string;
  pluginId: string;
  externalId: string;
  capacityBytes?: number;
}

interface StoredVolumeOp {
  op: string;
  volumeId: string;
  pluginId: string;
}

/**
 * Where the catalog (the client state, read once the agent is gone) and the
 * hostpath plugin (its volumes.json) disagree about the volumes of
 * `pluginId`: a volume only one side has, a capacity that differs, and an
 * operation intent nobody settled. Each line starts with "volume mismatch".
 */
export function volumeMismatches(dataDir: string, pluginState: string, pluginId: string): string[] {
  const file = path.join(dataDir, 'state.db');
  if (!fs.existsSync(file)) return [];
  const text = readText(path.join(pluginState, 'volumes.json'));
  const onPlugin = new Map<string, { name: string; capacityBytes: string }>();
  if (text)
    for (const v of (JSON.parse(text) as { volumes?: { id: string; name: string; capacityBytes: string }[] }).volumes ?? [])
      onPlugin.set(v.id, v);
  const db = openClientState({ path: file });
  try {
    const out: string[] = [];
    const catalogued = new Set<string>();
    for (const v of db.listVolumes<StoredCatalogVolume>().filter((x) => x.pluginId === pluginId)) {
      catalogued.add(v.externalId);
      const there = onPlugin.get(v.externalId);
      if (!there) out.push(`volume mismatch: ${v.id} is in the catalog (external id ${v.externalId}) but gone from the plugin`);
      else if (v.capacityBytes !== undefined && String(v.capacityBytes) !== there.capacityBytes)
        out.push(`volume mismatch: ${v.id}: the catalog says ${v.capacityBytes} bytes, the plugin has ${there.capacityBytes}`);
    }
    for (const [id, v] of onPlugin)
      if (!catalogued.has(id))
        out.push(
          `volume mismatch: the plugin has volume ${id} (name "${v.name}", ${v.capacityBytes} bytes) that the catalog does not know`,
        );
    const { records, failures } = db.listVolumeOps<StoredVolumeOp>();
    for (const { record } of records)
      out.push(`volume mismatch: a ${record.op} of ${record.volumeId} on ${record.pluginId} was never settled (its intent is left)`);
    for (const f of failures) out.push(`volume mismatch: unreadable operation intent ${f.key}`);
    return out;
  } finally {
    db.dispose();
  }
}
