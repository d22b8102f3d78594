// What a fault-suite round may leave behind, counted after every job was
// stopped: mounts under the round's dir, processes under it (executors,
// tasks, plugins), claims the catalog still holds (and controller
// attachments the plugin still records), allocs that never reached a
// terminal state, and mount records in the client state that outlived what
// they describe. The counts are read from the kernel (/proc), the agent's
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
}

export const LEAK_KINDS: readonly (keyof LeakCounts)[] = ['mounts', 'processes', 'claims', 'allocs', 'records'];

export function noLeaks(): LeakCounts {
  return { mounts: 0, processes: 0, claims: 0, allocs: 0, records: 0 };
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
    if (cwd === root || cwd.startsWith(`${root}/`) || readText(path.join(dir, 'cmdline')).includes(root) || readText(path.join(dir, 'environ')).includes(root)) pids.push(pid);
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
    const left = records.map(({ key, record: r }) => `record ${key}: desired ${r.desired}, claimed ${r.claimed}, staged ${r.staged}, published ${r.published}${r.targetPath ? ` at ${r.targetPath}` : ''}`);
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
