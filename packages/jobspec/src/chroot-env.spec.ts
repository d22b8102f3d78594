// chroot_env read as Nomad reads it (host path = path in the task), with
// which host paths exist injected: the refusals do not hang on this host's
// dirs. parseAgentConfig's own spec covers where the map is read from.
import { ValidationError } from '@csiplug/core';
import { chosenChrootEnv, chrootEnvNotices, readChrootEnv } from './chroot-env';
import { BlockReader, Where } from './document';

/** readChrootEnv of `plugin "exec" { chroot_env = map }` on a host where only `hostPaths` exist; a refusal's message. */
function read(map: Record<string, string>, hostPaths: readonly string[] = []): Record<string, string> | undefined | string {
  try {
    const b = new BlockReader({ chroot_env: map }, new Where('', 'plugin "exec".'), ['chroot_env']);
    return readChrootEnv(b, (p) => hostPaths.includes(p));
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as Error).message;
  }
}

describe('readChrootEnv', () => {
  it('reads host path → path in the task; no entries: undefined (the defaults hold)', () => {
    expect(read({ '/opt/busybox/bin': '/bin', '/usr/share': '/srv/code' })).toEqual({
      '/opt/busybox/bin': '/bin',
      '/usr/share': '/srv/code',
    });
    expect(read({})).toBeUndefined();
  });

  it('normalises trailing slashes as the driver does, so a task path given twice is caught at load', () => {
    expect(read({ '/usr/local/bin/': '/bin/' })).toEqual({ '/usr/local/bin': '/bin' });
    expect(read({ '/usr/local/bin/': '/bin/', '/bin': '/bin' })).toBe(
      'plugin "exec".chroot_env "/bin" = "/bin": the host path /usr/local/bin is already shown at /bin in the task; a task path takes one host path: remove one of the two',
    );
    expect(read({ '/usr/share/': '/a', '/usr/share': '/b' })).toBe(
      'plugin "exec".chroot_env "/usr/share" = "/b": the host path /usr/share is already shown at /a in the task; give each host path once',
    );
  });

  it.each([['/local'], ['/alloc/data'], ['/secrets'], ['/proc'], ['/dev/'], ['/sys/fs'], ['/'], ['/tmp']])(
    "refuses a task path on or below the task's own dirs: %s",
    (inTask) => {
      const message = read({ '/srv/code': inTask }, ['/srv/code']);
      expect(message).toMatch(
        /^plugin "exec"\.chroot_env "\/srv\/code" = ".*": .* in the task is the task's own \(\/proc, \/dev, \/sys, \/tmp, \/local, \/alloc, \/secrets, \/ and what is below them but \/tmp\): show the host's \/srv\/code at another path in the task, as "\/srv\/code" = "\/srv\/code"$/,
      );
    },
  );

  it('takes a task path below /tmp (bound on top of the task tmpfs)', () => {
    expect(read({ '/srv/code': '/tmp/code' })).toEqual({ '/srv/code': '/tmp/code' });
  });

  it('refuses an entry written the old way round, giving the ways out that keep each meaning', () => {
    expect(read({ '/srv/plugin-code': '/opt/code' }, ['/opt/code'])).toBe(
      'plugin "exec".chroot_env "/srv/plugin-code" = "/opt/code": there is no /srv/plugin-code on this host, but there is a /opt/code. ' +
        'chroot_env is "host path" = "path in the task", as in Nomad (csiplug used to read it the other way round). ' +
        'Create the host dir /srv/plugin-code if you meant to show it at /opt/code in the task; or remove the entry; ' +
        'or, if you meant to show this host\'s /opt/code at /srv/plugin-code in the task, swap it: "/opt/code" = "/srv/plugin-code"',
    );
    // Both there, or neither: not refused (the first is logged at start, the second left out at the task's start).
    expect(read({ '/srv/plugin-code': '/opt/code' }, ['/opt/code', '/srv/plugin-code'])).toEqual({ '/srv/plugin-code': '/opt/code' });
    expect(read({ '/srv/plugin-code': '/opt/code' })).toEqual({ '/srv/plugin-code': '/opt/code' });
  });
});

describe('chrootEnvNotices', () => {
  it('says, for each entry shown at another path, which host path the task sees where', () => {
    expect(chrootEnvNotices({ '/bin': '/bin', '/usr/': '/usr', '/opt/code': '/srv/plugin-code' })).toEqual([
      'chroot_env: each exec task sees this host\'s /opt/code at /srv/plugin-code (chroot_env is "host path" = "path in the task", as in Nomad; ' +
        'if that is the wrong way round, swap the entry)',
    ]);
  });
});

describe('chosenChrootEnv', () => {
  const r = () => new BlockReader({}, new Where(''), []);
  it('takes client { chroot_env } or plugin "exec" { chroot_env } whole, replacing the defaults, as Nomad\'s task dir; else the defaults', () => {
    const defaults = { '/bin': '/bin', '/usr': '/usr' };
    expect(chosenChrootEnv(r(), { '/opt/bin': '/bin' }, undefined, defaults)).toEqual({ '/opt/bin': '/bin' });
    expect(chosenChrootEnv(r(), undefined, { '/opt/bin': '/bin' }, defaults)).toEqual({ '/opt/bin': '/bin' });
    expect(chosenChrootEnv(r(), undefined, undefined, defaults)).toEqual(defaults);
    expect(() => chosenChrootEnv(r(), { '/a': '/a' }, { '/b': '/b' }, defaults)).toThrow(
      'plugin "exec" sets chroot_env, and so does client { chroot_env }: give it in one place, client { chroot_env } as in Nomad (each replaces the defaults whole; the two are not merged)',
    );
  });
});
