// `plugin "exec" { chroot_env }`: the host dirs an isolated task sees, read
// as Nomad reads its chroot_env — each entry is `"<host path>" = "<path in
// the task>"`. csiplug once read it the other way round; an entry written
// for that reading (its host path missing while its task path is a path on
// this host) would now mount something else, so it is refused with the
// entry swapped as the fix. An entry that shows a dir at a task path a
// default entry uses replaces that default (the defaults show each host dir
// at its own path).
import * as fs from 'fs';
import * as path from 'path';
import type { BlockReader } from './document';

/** Whether `p` is a usable absolute path: absolute, no "..". */
function absolute(p: string): boolean {
  return path.isAbsolute(p) && !p.split('/').includes('..');
}

/**
 * Reads the `chroot_env` map of a `plugin "exec"` block into `chrootEnv`
 * (host path → path in the task), which holds the defaults beforehand.
 * Reports each entry that is not absolute, written the old way round, or
 * shown at a task path another entry of the block already uses.
 */
export function readChrootEnv(b: BlockReader, chrootEnv: Record<string, string>, exists: (p: string) => boolean = fs.existsSync): void {
  const shownAt = new Map<string, string>();
  for (const [hostRaw, taskRaw] of Object.entries(b.stringMap('chroot_env'))) {
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
    const host = path.normalize(hostRaw);
    const inTask = path.normalize(taskRaw);
    if (host !== inTask && !exists(host) && exists(inTask)) {
      b.report(
        key,
        `${entry}: there is no ${host} on this host, but there is a ${inTask}: chroot_env is "host path" = "path in the task", as in Nomad ` +
          `(csiplug used to read it the other way round); to show the task this host's ${inTask} at ${host}, write "${inTask}" = "${host}"`,
      );
      continue;
    }
    const other = shownAt.get(inTask);
    if (other !== undefined) {
      b.report(key, `${entry}: the host path ${other} is already shown at ${inTask} in the task; a task path takes one host path`);
      continue;
    }
    shownAt.set(inTask, host);
    // A default shown at the same task path gives way to the operator's entry.
    for (const [h, t] of Object.entries(chrootEnv)) if (t === inTask && h !== host) delete chrootEnv[h];
    chrootEnv[host] = inTask;
  }
}
