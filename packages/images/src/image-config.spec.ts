// Image config + Nomad docker task config -> the process, by Nomad's and Docker's rules.
import { ImageProcessError } from './unpack/errors';
import { DEFAULT_PATH_ENV, mergeEnv, resolveArgv, resolveImageProcess, resolveWorkingDir } from './image-config';

const IMAGE = {
  Entrypoint: ['/bin/plugin'],
  Cmd: ['--endpoint', 'unix:///csi/csi.sock'],
  Env: ['PATH=/opt/bin:/bin', 'LEVEL=info'],
  WorkingDir: '/work',
  User: '',
};

describe('resolveArgv', () => {
  it('is the image Entrypoint + Cmd when the task sets nothing', () => {
    expect(resolveArgv(IMAGE, {})).toEqual(['/bin/plugin', '--endpoint', 'unix:///csi/csi.sock']);
  });

  it('replaces Cmd with args (Nomad: Cmd = args)', () => {
    expect(resolveArgv(IMAGE, { args: ['--v', '5'] })).toEqual(['/bin/plugin', '--v', '5']);
  });

  it('replaces Cmd with command + args, keeping the image Entrypoint (Nomad: Cmd = [command, ...args])', () => {
    expect(resolveArgv(IMAGE, { command: '--nodeid', args: ['n1'] })).toEqual(['/bin/plugin', '--nodeid', 'n1']);
    expect(resolveArgv({ Cmd: ['/bin/sh'] }, { command: '/bin/echo', args: ['hi'] })).toEqual(['/bin/echo', 'hi']);
  });

  it('drops the image Cmd when the task sets an entrypoint (Docker merge)', () => {
    expect(resolveArgv(IMAGE, { entrypoint: ['/bin/sh', '-c'] })).toEqual(['/bin/sh', '-c']);
    expect(resolveArgv(IMAGE, { entrypoint: ['/bin/sh', '-c'], args: ['echo hi'] })).toEqual(['/bin/sh', '-c', 'echo hi']);
  });

  it('treats an empty command as unset, as Nomad does', () => {
    expect(resolveArgv(IMAGE, { command: '' })).toEqual(['/bin/plugin', '--endpoint', 'unix:///csi/csi.sock']);
  });

  it('refuses a command with white space around it (Nomad validateCommand)', () => {
    expect(() => resolveArgv(IMAGE, { command: ' /bin/x' })).toThrow(/white space/);
    expect(() => resolveArgv(IMAGE, { command: '   ' })).toThrow(/empty/);
  });

  it('refuses when nothing gives a command', () => {
    expect(() => resolveArgv({}, {})).toThrow(ImageProcessError);
    expect(() => resolveArgv({ Entrypoint: null, Cmd: null }, { args: [] })).toThrow(/no command to run/);
  });
});

describe('mergeEnv', () => {
  it('puts the task env first and adds image variables the task did not set', () => {
    expect(mergeEnv(['PATH=/opt/bin', 'LEVEL=info', 'FLAG', 'LEVEL=dup'], { LEVEL: 'debug', NOMAD_TASK_NAME: 't' })).toEqual([
      'LEVEL=debug',
      'NOMAD_TASK_NAME=t',
      'PATH=/opt/bin',
      'FLAG',
    ]);
  });
});

describe('resolveWorkingDir', () => {
  it('prefers work_dir, then the image, then /; refuses a relative dir', () => {
    expect(resolveWorkingDir(IMAGE, { work_dir: '/srv' })).toBe('/srv');
    expect(resolveWorkingDir(IMAGE, {})).toBe('/work');
    expect(resolveWorkingDir({}, {})).toBe('/');
    expect(() => resolveWorkingDir({ WorkingDir: 'rel' }, {})).toThrow(/not an absolute path/);
  });
});

describe('resolveImageProcess', () => {
  const passwd = 'root:x:0:0:root:/root:/bin/sh\napp:x:100:101::/home/app:/bin/sh\n';
  const group = 'app:x:101:\n';

  it('combines argv, env (task wins, HOME from passwd), cwd and the image user', () => {
    const p = resolveImageProcess({ ...IMAGE, User: 'app' }, { env: { LEVEL: 'debug' } }, { passwd, group });
    expect(p.argv).toEqual(['/bin/plugin', '--endpoint', 'unix:///csi/csi.sock']);
    expect(p.env).toEqual(['LEVEL=debug', 'PATH=/opt/bin:/bin', 'HOME=/home/app']);
    expect(p.cwd).toBe('/work');
    expect(p.user).toMatchObject({ uid: 100, gid: 101, home: '/home/app' });
  });

  it("lets the task's user win and adds Docker's default PATH when no one sets it", () => {
    const p = resolveImageProcess({ Cmd: ['/x'], User: 'app' }, { user: 'root' }, { passwd, group });
    expect(p.user.uid).toBe(0);
    expect(p.env).toEqual([`PATH=${DEFAULT_PATH_ENV}`, 'HOME=/root']);
  });

  it('refuses an image user the image does not define', () => {
    expect(() => resolveImageProcess({ Cmd: ['/x'], User: 'ghost' }, {}, { passwd, group })).toThrow(/"ghost"/);
  });
});
