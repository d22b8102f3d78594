// Who an isolated (exec) task runs as: the jobspec's `user`, as Nomad's exec
// driver reads it (a task without one runs as nobody), resolved to numbers
// on this host's /etc/passwd and /etc/group — the same files the default
// chroot_env shows the task — and checked against the agent's
// `plugin "exec" { allowed_users }`. A CSI plugin task keeps running as root
// (it mounts storage) unless its jobspec names a user.
import * as fs from 'fs';
import type { TaskUser } from '@csiplug/driver';
import type { ExecDriverConfig } from '@csiplug/jobspec';

/** The user of a task without `user` (Nomad's exec driver default). */
export const DEFAULT_TASK_USER = 'nobody';

/** A task user resolved on this host: its name, ids and supplementary groups. */
export interface ResolvedTaskUser extends TaskUser {
  name: string;
}

/** Where the host's user and group databases are (tests point elsewhere). */
export interface UserDatabases {
  passwd: string;
  group: string;
}

const HOST_DATABASES: UserDatabases = { passwd: '/etc/passwd', group: '/etc/group' };

/** The rows of a colon-separated database (passwd, group), comments and blank lines left out. */
function rows(file: string): string[][] {
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.trim() && !line.startsWith('#'))
    .map((line) => line.split(':'));
}

/**
 * `user` (a name, or a uid) as numbers; throws an Error that says what is
 * missing. A uid with no passwd entry is taken as is, with its own number
 * as its group, as runc would.
 */
export function resolveTaskUser(user: string, db: UserDatabases = HOST_DATABASES): ResolvedTaskUser {
  const passwd = rows(db.passwd);
  const entry = passwd.find((r) => r[0] === user) ?? (/^\d+$/.test(user) ? passwd.find((r) => r[2] === user) : undefined);
  if (!entry) {
    if (/^\d+$/.test(user)) return { name: user, uid: Number(user), gid: Number(user) };
    throw new Error(`user "${user}" does not exist on this host (not in ${db.passwd})`);
  }
  const [name = user, , uid = '', gid = ''] = entry;
  let additionalGids: number[] = [];
  try {
    additionalGids = rows(db.group)
      .filter((r) => (r[3] ?? '').split(',').includes(name) && r[2] !== gid && /^\d+$/.test(r[2] ?? ''))
      .map((r) => Number(r[2]));
  } catch {
    // No group database: the primary group alone.
  }
  return { name, uid: Number(uid), gid: Number(gid), ...(additionalGids.length ? { additionalGids } : {}) };
}

/**
 * Why this agent does not run a task as `user` (undefined: it does). The
 * default user is always allowed; another needs `allowed_users` to list it,
 * or, with no `allowed_users`, not to be root (uid 0).
 */
export function userRefusal(requested: string | undefined, resolved: ResolvedTaskUser, exec: ExecDriverConfig): string | undefined {
  if (requested === undefined) return undefined;
  if (exec.allowedUsers) {
    if (exec.allowedUsers.includes(resolved.name) || exec.allowedUsers.includes(String(resolved.uid))) return undefined;
    return `user "${requested}" is not allowed on this agent (plugin "exec" { allowed_users = [${exec.allowedUsers.map((u) => `"${u}"`).join(', ')}] }): add it there, or leave user out to run the task as ${DEFAULT_TASK_USER}`;
  }
  if (resolved.uid === 0)
    return `user "${requested}" is root, which this agent does not run isolated tasks as unless plugin "exec" { allowed_users } lists it; leave user out to run the task as ${DEFAULT_TASK_USER}`;
  return undefined;
}
