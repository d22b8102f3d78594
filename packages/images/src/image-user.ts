// The user a task's process runs as, from a Docker user string ("name",
// "uid", "name:group", "uid:gid"…) resolved against the IMAGE's /etc/passwd
// and /etc/group, never the host's — the rules of runc's
// libcontainer/user.GetExecUser, which Docker uses: a name must be in the
// image's passwd (or group) file; a number need not be (it is used as it
// is, as `docker run -u 1234` does); with no group given the user's primary
// gid comes from passwd and the supplementary gids from the groups that list
// the user; the home dir from passwd, else "/". Reading the files from a
// root goes through secure-join, so an image's /etc/passwd that is a
// symlink to /etc/shadow reads the image's file, not the host's.
import { constants as fsc, promises as fsp } from 'node:fs';
import { ImageUserError } from './unpack/errors';
import { resolveInRoot } from './unpack/secure-join';

export interface ImageUser {
  readonly uid: number;
  readonly gid: number;
  /** Supplementary groups (sorted, without the primary gid). */
  readonly additionalGids: readonly number[];
  readonly home: string;
  /** The passwd name, when the user has an entry. */
  readonly name?: string;
}

interface PasswdEntry {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

interface GroupEntry {
  name: string;
  gid: number;
  members: string[];
}

const MAX_ID = 2 ** 31 - 1;

function parseId(text: string): number | undefined {
  if (!/^[0-9]+$/.test(text)) return undefined;
  const n = Number(text);
  return n <= MAX_ID ? n : undefined;
}

/** passwd(5) lines; malformed lines are skipped, as libc skips them. */
export function parsePasswd(text: string): PasswdEntry[] {
  const out: PasswdEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim() || line.startsWith('#')) continue;
    const f = line.split(':');
    if (f.length < 7) continue;
    const uid = parseId(f[2]!);
    const gid = parseId(f[3]!);
    if (uid === undefined || gid === undefined || !f[0]) continue;
    out.push({ name: f[0], uid, gid, home: f[5]! });
  }
  return out;
}

/** group(5) lines; malformed lines are skipped. */
export function parseGroup(text: string): GroupEntry[] {
  const out: GroupEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim() || line.startsWith('#')) continue;
    const f = line.split(':');
    if (f.length < 4) continue;
    const gid = parseId(f[2]!);
    if (gid === undefined || !f[0]) continue;
    out.push({ name: f[0], gid, members: f[3]!.split(',').filter(Boolean) });
  }
  return out;
}

/**
 * Resolves a Docker user string against the image's passwd and group texts
 * (undefined when the image lacks the file). "" means root.
 */
export function resolveImageUser(spec: string, passwd: string | undefined, group: string | undefined): ImageUser {
  const [userArg = '', groupArg = '', ...extra] = spec.split(':');
  if (extra.length) throw new ImageUserError(spec, 'a user is "user", "uid", "user:group" or "uid:gid"');
  const users = passwd !== undefined ? parsePasswd(passwd) : [];
  const groups = group !== undefined ? parseGroup(group) : [];

  let uid = 0;
  let gid = 0;
  let home = '/';
  let name: string | undefined;
  const uidArg = userArg === '' ? 0 : parseId(userArg);
  const byUser = users.find((u) => (userArg === '' ? u.uid === 0 : u.name === userArg || (uidArg !== undefined && u.uid === uidArg)));
  if (byUser) {
    ({ uid, gid, home, name } = byUser);
    home ||= '/';
  } else if (uidArg !== undefined) {
    uid = uidArg;
  } else if (passwd === undefined) {
    throw new ImageUserError(spec, `the image has no /etc/passwd to find "${userArg}" in`);
  } else {
    throw new ImageUserError(spec, `no user "${userArg}" in the image's /etc/passwd`);
  }

  let additionalGids: number[] = [];
  if (groupArg !== '') {
    const gidArg = parseId(groupArg);
    const byGroup = groups.find((g) => (gidArg !== undefined ? g.gid === gidArg : g.name === groupArg));
    if (byGroup) gid = byGroup.gid;
    else if (gidArg !== undefined) gid = gidArg;
    else if (group === undefined) throw new ImageUserError(spec, `the image has no /etc/group to find group "${groupArg}" in`);
    else throw new ImageUserError(spec, `no group "${groupArg}" in the image's /etc/group`);
  } else if (name !== undefined) {
    additionalGids = [...new Set(groups.filter((g) => g.members.includes(name!)).map((g) => g.gid))]
      .filter((g) => g !== gid)
      .sort((a, b) => a - b);
  }
  return { uid, gid, additionalGids, home, ...(name !== undefined ? { name } : {}) };
}

/** The image's /etc/passwd and /etc/group texts from an unpacked root (undefined where absent), read inside the root only. */
export async function readImageUserFiles(rootfs: string): Promise<{ passwd?: string; group?: string }> {
  const read = async (rel: string): Promise<string | undefined> => {
    const host = await resolveInRoot(rootfs, rel, { followFinal: true });
    try {
      const handle = await fsp.open(host, fsc.O_RDONLY | fsc.O_NOFOLLOW);
      try {
        const st = await handle.stat();
        if (!st.isFile()) return undefined;
        if (st.size > 16 * 1024 * 1024)
          throw new ImageUserError(rel, `the image's /${rel} is ${st.size} bytes, too large to be a user database`);
        return await handle.readFile('utf8');
      } finally {
        await handle.close();
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'ENOTDIR') return undefined;
      throw err;
    }
  };
  const [passwd, group] = [await read('etc/passwd'), await read('etc/group')];
  return { ...(passwd !== undefined ? { passwd } : {}), ...(group !== undefined ? { group } : {}) };
}
