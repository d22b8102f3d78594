import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { defaultExecConfig } from '@csiplug/jobspec';
import { resolveTaskUser, userRefusal } from './task-user';

describe('task users', () => {
  let dir: string;
  let db: { passwd: string; group: string };
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-users-'));
    db = { passwd: path.join(dir, 'passwd'), group: path.join(dir, 'group') };
    fs.writeFileSync(
      db.passwd,
      [
        'root:x:0:0:root:/root:/bin/bash',
        '# a comment',
        'www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin',
        'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin',
        '',
      ].join('\n'),
    );
    fs.writeFileSync(db.group, ['root:x:0:', 'www-data:x:33:', 'disk:x:6:www-data', 'video:x:44:nobody,www-data', ''].join('\n'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('resolves a name or a uid on the host databases, with its supplementary groups', () => {
    expect(resolveTaskUser('nobody', db)).toEqual({ name: 'nobody', uid: 65534, gid: 65534, additionalGids: [44] });
    expect(resolveTaskUser('33', db)).toEqual({ name: 'www-data', uid: 33, gid: 33, additionalGids: [6, 44] });
    expect(resolveTaskUser('root', db)).toEqual({ name: 'root', uid: 0, gid: 0 });
    // A uid no passwd entry names runs as itself, as runc takes it.
    expect(resolveTaskUser('4000', db)).toEqual({ name: '4000', uid: 4000, gid: 4000 });
    expect(() => resolveTaskUser('ghost', db)).toThrow(`user "ghost" does not exist on this host (not in ${db.passwd})`);
  });

  it('allows the default user always, any user but root without allowed_users, and only the listed ones with it', () => {
    const exec = defaultExecConfig();
    const root = resolveTaskUser('root', db);
    const www = resolveTaskUser('www-data', db);
    expect(userRefusal(undefined, resolveTaskUser('nobody', db), exec)).toBeUndefined();
    expect(userRefusal('www-data', www, exec)).toBeUndefined();
    expect(userRefusal('root', root, exec)).toMatch(
      /^user "root" is root, which this agent does not run isolated tasks as unless plugin "exec" \{ allowed_users \} lists it/,
    );
    expect(userRefusal('0', root, exec)).toMatch(/^user "0" is root/);
    const listed = { ...exec, allowedUsers: ['root', '33'] };
    expect(userRefusal('root', root, listed)).toBeUndefined();
    expect(userRefusal('www-data', www, listed)).toBeUndefined();
    expect(userRefusal('nobody', resolveTaskUser('nobody', db), listed)).toBe(
      'user "nobody" is not allowed on this agent (plugin "exec" { allowed_users = ["root", "33"] }): add it there, or leave user out to run the task as nobody',
    );
  });
});
