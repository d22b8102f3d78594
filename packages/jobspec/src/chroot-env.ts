// chroot_env: the host dirs an isolated task sees, read as Nomad reads its
// chroot_env — each entry is `"<host path>" = "<path in the task>"`.
//
// Where: Nomad's place, `client { chroot_env = { … } }`; or csiplug's own
// `plugin "exec" { chroot_env = { … } }` (an extension kept for old
// configs), with the same meaning. Giving both is refused, naming both.
// A map with entries REPLACES the defaults, as Nomad's task dir hook does
// (an empty or absent map: the defaults). A map without a /bin in the task
// leaves the task no /bin/sh: its command then runs as it is, with no init
// to pass signals on (isolation.ts in the driver).
//
// csiplug once read the map the other way round; an entry written for that
// reading (its host path missing while its task path is a path on this
// host) would now mount something else, so it is refused with the ways out.
// Every entry that shows a host dir at another path is logged once at the
// agent's start (chrootEnvNotices), so a reversed entry whose two paths both
// exist is seen too.
import { isTaskOwnPath, taskOwnPathsText } from '@csiplug/core';
import * as fs from 'fs';
import * as path from 'path';
import type { BlockReader } from './document';

/** Whether `p` is a usable absolute path: absolute, no "..". */
function absolute(p: string): boolean {
  return path.isAbsolute(p) && !p.split('/').includes('..');
}

/** `p` as the driver reads a path: normalised, no trailing "/" (but "/"). */
export function normaliseChrootPath(p: string): string {
  return path.normalize(p).replace(/\/+$/, '') || '/';
}

/**
 * Reads the `chroot_env` map of block `b` (host path → path in the task);
 * undefined when the block has none or an empty one (the defaults hold
 * then). Reports each entry that is not absolute, lands on the task's own
 * dirs, is written the old way round, or repeats a host or task path.
 */
export function readChrootEnv(b: BlockReader, exists: (p: string) => boolean = fs.existsSync): Record<string, string> | undefined {
  const entries = Object.entries(b.stringMap('chroot_env'));
  if (entries.length === 0) return undefined;
  const chrootEnv: Record<string, string> = {};
  const shownAt = new Map<string, string>();
  for (const [hostRaw, taskRaw] of entries) {
    // One problem per entry: each is reported under its own key, `chroot_env "<host path>"`.
    const key = `chroot_env ${JSON.stringify(hostRaw)}`;
    const entry = `= ${JSON.stringify(taskRaw)}`;
    if (!absolute(hostRaw)) {
      b.report(key, `${entry}: its host path (the key) must be an absolute path without ".."`);
      continue;
    }
    if (!absolute(taskRaw)) {
      b.report(key, `${entry}: its path in the task (the value) must be an absolute path without ".."`);
      continue;
    }
    const host = normaliseChrootPath(hostRaw);
    const inTask = normaliseChrootPath(taskRaw);
    if (isTaskOwnPath(inTask)) {
      b.report(
        key,
        `${entry}: ${inTask} in the task is the task's own (${taskOwnPathsText()} and what is below them but /tmp): ` +
          `show the host's ${host} at another path in the task, as "${host}" = "/srv/${path.basename(host) || 'host'}"`,
      );
      continue;
    }
    if (host !== inTask && !exists(host) && exists(inTask)) {
      b.report(
        key,
        `${entry}: there is no ${host} on this host, but there is a ${inTask}. chroot_env is "host path" = "path in the task", as in Nomad ` +
          `(csiplug used to read it the other way round). Create the host dir ${host} if you meant to show it at ${inTask} in the task; ` +
          `or remove the entry; or, if you meant to show this host's ${inTask} at ${host} in the task, swap it: "${inTask}" = "${host}"`,
      );
      continue;
    }
    const other = shownAt.get(inTask);
    if (other !== undefined) {
      b.report(
        key,
        `${entry}: the host path ${other} is already shown at ${inTask} in the task; a task path takes one host path: remove one of the two`,
      );
      continue;
    }
    if (Object.hasOwn(chrootEnv, host)) {
      b.report(key, `${entry}: the host path ${host} is already shown at ${chrootEnv[host]} in the task; give each host path once`);
      continue;
    }
    shownAt.set(inTask, host);
    chrootEnv[host] = inTask;
  }
  return chrootEnv;
}

/**
 * The chroot_env the agent uses: `client { chroot_env }` or `plugin "exec"
 * { chroot_env }` (refused when both have entries), else the defaults.
 */
export function chosenChrootEnv(
  r: BlockReader,
  fromClient: Record<string, string> | undefined,
  fromPlugin: Record<string, string> | undefined,
  defaults: Readonly<Record<string, string>>,
): Record<string, string> {
  if (fromClient && fromPlugin) {
    r.report(
      'plugin "exec"',
      'sets chroot_env, and so does client { chroot_env }: give it in one place, client { chroot_env } as in Nomad ' +
        '(each replaces the defaults whole; the two are not merged)',
    );
  }
  return { ...(fromClient ?? fromPlugin ?? defaults) };
}

/** A line for the agent's start for each entry that shows a host dir at another path in the task. */
export function chrootEnvNotices(chrootEnv: Readonly<Record<string, string>>): string[] {
  return Object.entries(chrootEnv)
    .filter(([host, inTask]) => normaliseChrootPath(host) !== normaliseChrootPath(inTask))
    .map(
      ([host, inTask]) =>
        `chroot_env: each exec task sees this host's ${host} at ${inTask} (chroot_env is "host path" = "path in the task", as in Nomad; ` +
        `if that is the wrong way round, swap the entry)`,
    );
}
