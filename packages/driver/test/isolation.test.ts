// Isolated tasks on the real runc (Debian's runc package; `npm test`'s setup
// installs it): what the task sees (a read-only root of host dirs, its own
// dirs, pid and uts namespaces, volumes read-only or not), that stop and
// SIGKILL leave no container behind, that a new driver (an agent restarted)
// finds a live isolated task and stops it, and the error without runc.
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryLogger, RealClock } from '@csiplug/core';
import type { DriverTaskConfig, TaskHandle } from '../src/driver';
import { TaskStartError } from '../src/errors';
import { ExecDriver, findRunc, type ExecDriverOptions } from '../src/exec-driver';
import type { IsolationConfig } from '../src/isolation';

const RUNC = findRunc();
if (!RUNC) throw new Error('runc is not installed: `npm test` installs it (scripts/setup-engines.sh), or apt-get install runc');

async function until<T>(what: string, check: () => T | undefined | false, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = check();
    if (value !== undefined && value !== false && value !== '') return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The host dirs every task here sees, each at its own path (host path → path in the task). */
const HOST_DIRS: Readonly<Record<string, string>> = { '/bin': '/bin', '/lib': '/lib', '/lib64': '/lib64', '/usr': '/usr', '/etc': '/etc' };

const read = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8') : '');

describe('ExecDriver: isolated tasks on runc', () => {
  let root: string;
  let runcRoot: string;
  let drivers: ExecDriver[];
  let handles: TaskHandle[];

  const driver = (options: ExecDriverOptions = {}) => {
    const d = new ExecDriver(new RealClock(), new MemoryLogger(), { runcRoot, pollInterval: 200, ...options });
    drivers.push(d);
    return d;
  };
  const containers = () =>
    (JSON.parse(execFileSync(RUNC, ['--root', runcRoot, 'list', '--format', 'json']).toString() || 'null') as { id: string }[] | null)?.map(
      (c) => c.id,
    ) ?? [];

  /** A task config with its dirs made: local, secrets, the alloc's shared dir. It runs as root unless `iso` says whom (the driver's own default, nobody, has its own test). */
  const task = (name: string, script: string, iso: Partial<IsolationConfig> = {}): DriverTaskConfig & { local: string } => {
    const taskDir = join(root, 'alloc-1', name);
    const local = join(taskDir, 'local');
    for (const d of [local, join(taskDir, 'secrets'), join(root, 'alloc-1', 'alloc')]) mkdirSync(d, { recursive: true });
    return {
      allocId: 'alloc-1',
      taskName: name,
      taskDir,
      command: '/bin/sh',
      args: ['-c', script],
      env: { GREETING: 'hello' },
      isolation: {
        chroot: HOST_DIRS,
        localDir: local,
        allocDir: join(root, 'alloc-1', 'alloc'),
        secretsDir: join(taskDir, 'secrets'),
        user: { uid: 0, gid: 0 },
        ...iso,
      },
      local,
    };
  };

  /** Starts a task that runs `setup`, writes /local/up, then runs `main`; waits until it is up. */
  const running = async (d: ExecDriver, name: string, setup: string, main: string) => {
    const cfg = task(name, `${setup ? `${setup}; ` : ''}echo up > /local/up; ${main}`);
    const h = await d.start(cfg);
    handles.push(h);
    await until(`task ${name} up`, () => read(join(cfg.local, 'up')));
    return { cfg, h };
  };

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'csiplug-iso-'));
    runcRoot = join(root, 'runc');
    drivers = [];
    handles = [];
  });
  afterEach(async () => {
    for (const h of handles)
      await driver()
        .stop(h, 'SIGKILL', 0)
        .catch(() => undefined);
    for (const id of containers()) execFileSync(RUNC, ['--root', runcRoot, 'delete', '--force', id]);
    for (const d of drivers) d.dispose();
    rmSync(root, { recursive: true, force: true });
  });

  it('runs the task in its own root: host dirs read-only, /local writable, its own pid and uts namespaces under an init, its env; exits with its code and leaves no container', async () => {
    const cfg = task(
      'web',
      'echo "host=$(hostname) greeting=$GREETING cwd=$(pwd) init=$(tr \"\\\\0\" \" \" < /proc/1/cmdline)" > /local/out; echo x > /usr/nope 2>> /local/out || echo "usr read-only" >> /local/out; ls / > /local/root; echo shared > /alloc/f; exit 7',
    );
    const d = driver();
    const h = await d.start(cfg);
    handles.push(h);
    expect(h.runc).toEqual({ root: runcRoot, id: 'csiplug-alloc-1-web' });
    const exit = await d.wait(h);
    expect(exit.exitCode).toBe(7);
    const out = read(join(cfg.local, 'out'));
    // Its own pid namespace: pid 1 is the init that passes signals on to the task.
    expect(out).toContain('host=web greeting=hello cwd=/local init=/bin/sh -c');
    expect(out).toMatch(/init=\/bin\/sh -c [\s\S]* csiplug-init \/bin\/sh -c /);
    expect(out).toContain('usr read-only');
    expect(existsSync('/usr/nope')).toBe(false);
    // Nothing of the host's root but what was mounted (and the task's own dirs).
    expect(read(join(cfg.local, 'root')).split('\n').filter(Boolean).sort()).toEqual(
      ['alloc', 'bin', 'dev', 'etc', 'lib', 'lib64', 'local', 'proc', 'secrets', 'sys', 'tmp', 'usr'].filter(
        (d) => d !== 'lib64' || existsSync('/lib64'),
      ),
    );
    expect(read(join(root, 'alloc-1', 'alloc', 'f'))).toBe('shared\n');
    // The task dir itself (the executor's records) is not in the task.
    expect(read(join(cfg.local, 'out'))).not.toContain('.executor');
    await until('the container removed', () => containers().length === 0);
  });

  it("shows a chroot_env host dir at the task path it names (host path = path in the task, as Nomad), read-only, and not at the host's own path", async () => {
    const code = join(root, 'plugin-code');
    mkdirSync(code);
    writeFileSync(join(code, 'hello.txt'), 'from the host\n');
    const cfg = task(
      'chroot',
      'cat /srv/code/hello.txt > /local/out; echo x > /srv/code/new 2>/dev/null || echo "code read-only" >> /local/out; ' +
        `test -e ${code} || echo "no host path inside" >> /local/out; exit 0`,
      { chroot: { ...HOST_DIRS, [code]: '/srv/code' } },
    );
    const d = driver();
    const h = await d.start(cfg);
    handles.push(h);
    expect((await d.wait(h)).exitCode).toBe(0);
    expect(read(join(cfg.local, 'out'))).toBe('from the host\ncode read-only\nno host path inside\n');
    expect(existsSync(join(code, 'new'))).toBe(false);
  });

  it('runs under the init when the task\'s /bin is another host dir ("/usr/bin" = "/bin"): pid 1 is the init, the command its child', async () => {
    const rest = Object.fromEntries(Object.entries(HOST_DIRS).filter(([host]) => host !== '/bin'));
    const cfg = task('other-bin', 'tr "\\0" " " < /proc/1/cmdline > /local/pid1; echo "$$" > /local/self; exit 0', {
      chroot: { ...rest, '/usr/bin': '/bin' },
    });
    const d = driver();
    const h = await d.start(cfg);
    handles.push(h);
    expect((await d.wait(h)).exitCode).toBe(0);
    expect(read(join(cfg.local, 'pid1'))).toContain('csiplug-init');
    expect(read(join(cfg.local, 'self')).trim()).not.toBe('1');
  });

  it('a task with no user runs as nobody; its own dirs are mounted nosuid and nodev', async () => {
    const cfg = task('nobody', 'id -u > /alloc/uid; grep -E " /(alloc|local|secrets) " /proc/self/mountinfo > /alloc/mounts; exit 0', {
      user: undefined,
    });
    const shared = join(root, 'alloc-1', 'alloc');
    chownSync(shared, 65534, 65534);
    const d = driver();
    const h = await d.start(cfg);
    handles.push(h);
    expect((await d.wait(h)).exitCode).toBe(0);
    expect(read(join(shared, 'uid')).trim()).toBe('65534');
    const mounts = read(join(shared, 'mounts')).trim().split('\n');
    expect(mounts).toHaveLength(3);
    for (const m of mounts) expect(m.split(' ')[5]!.split(',')).toEqual(expect.arrayContaining(['nosuid', 'nodev']));
  });

  it('a read-only mount refuses writes (EROFS), a writable one takes them', async () => {
    const ro = join(root, 'vol-ro');
    const rw = join(root, 'vol-rw');
    mkdirSync(ro);
    mkdirSync(rw);
    writeFileSync(join(ro, 'data'), 'kept');
    const cfg = task('vols', 'cat /ro/data > /local/read; { echo more >> /ro/data; } 2>> /local/err; echo written > /rw/new; exit 0', {
      mounts: [
        { source: ro, destination: '/ro', readOnly: true },
        { source: rw, destination: '/rw' },
      ],
    });
    const d = driver();
    const h = await d.start(cfg);
    handles.push(h);
    expect((await d.wait(h)).exitCode).toBe(0);
    expect(read(join(cfg.local, 'read'))).toBe('kept');
    expect(read(join(cfg.local, 'err'))).toMatch(/Read-only file system/);
    expect(read(join(ro, 'data'))).toBe('kept');
    expect(read(join(rw, 'new'))).toBe('written\n');
  });

  it("a privileged task (a block-device plugin) may open the host's devices and write to /sys; any other task gets neither", async () => {
    // The host's loop-control device (the loop module; present on the machines this runs on).
    expect(existsSync('/dev/loop-control') ? 'present' : 'missing: modprobe loop').toBe('present');
    const sysMode = 'awk \'$5 == "/sys" { print $6 }\' /proc/self/mountinfo | cut -d, -f1 > /local/sys';
    const tryOpen = (dev: string) => `if ( exec 3<>${dev} ) 2>/dev/null; then echo opened; else echo refused; fi > /local/dev`;
    const d = driver();
    // Privileged: the host's /dev itself.
    const privileged = task('block', `${tryOpen('/dev/loop-control')}; ${sysMode}`, { privileged: true });
    const h1 = await d.start(privileged);
    handles.push(h1);
    expect((await d.wait(h1)).exitCode).toBe(0);
    expect(read(join(privileged.local, 'dev'))).toBe('opened\n');
    expect(read(join(privileged.local, 'sys'))).toBe('rw\n');
    // Not privileged: it may make the device node (mknod is a default capability), but the device cgroup refuses to open it.
    const plain = task('plain', `mknod /dev/lc c 10 237 && echo made > /local/mknod; ${tryOpen('/dev/lc')}; ${sysMode}`);
    const h2 = await d.start(plain);
    handles.push(h2);
    expect((await d.wait(h2)).exitCode).toBe(0);
    expect(read(join(plain.local, 'mknod'))).toBe('made\n');
    expect(read(join(plain.local, 'dev'))).toBe('refused\n');
    expect(read(join(plain.local, 'sys'))).toBe('ro\n');
  });

  it('stop passes the kill signal on to the task; one that ignores it is killed at the timeout, and no container is left either way', async () => {
    const d = driver();
    const polite = await running(d, 'polite', 'trap "echo term > /local/got; exit 3" TERM', 'while true; do sleep 0.05; done');
    expect((await d.stop(polite.h, 'SIGTERM', 10_000)).exitCode).toBe(3);
    expect(read(join(polite.cfg.local, 'got'))).toBe('term\n');

    const stubborn = await running(d, 'stubborn', 'trap "" TERM', 'while true; do sleep 0.05; done');
    await d.stop(stubborn.h, 'SIGTERM', 300);
    await until('no container left', () => containers().length === 0);
  });

  it('a task with no handler of its own (a bare sleep) stops on the kill signal at once: the init passes it on', async () => {
    const d = driver();
    const { h } = await running(d, 'sleeper', '', 'exec sleep 3600');
    // SIGTERM ended it (128 + 15), not the SIGKILL a minute later (128 + 9).
    expect((await d.stop(h, 'SIGTERM', 60_000)).exitCode).toBe(128 + 15);
  });

  it('a task that handles SIGINT itself gets it (a background command of a shell would start with it ignored)', async () => {
    const d = driver();
    const { cfg, h } = await running(d, 'int', 'trap "echo int > /local/got; exit 4" INT', 'while true; do sleep 0.05; done');
    expect((await d.stop(h, 'SIGINT', 60_000)).exitCode).toBe(4);
    expect(read(join(cfg.local, 'got'))).toBe('int\n');
  });

  it('a new driver (the agent restarted) finds the live isolated task, and stops it; an exited one leaves nothing', async () => {
    const cfg = task('long', 'echo up > /local/up; while true; do sleep 0.05; done');
    const first = driver();
    const h = await first.start(cfg);
    handles.push(h);
    await until('the task up', () => read(join(cfg.local, 'up')));
    first.dispose();
    const second = driver();
    expect(await second.recover(h)).toEqual({ running: true });
    expect(second.adopt({ allocId: 'alloc-1', taskName: 'long', taskDir: cfg.taskDir })?.runc).toEqual(h.runc);
    await second.stop(h, 'SIGTERM', 2_000);
    await until('no container left', () => containers().length === 0);
    expect((await second.recover(h)).running).toBe(false);
  });

  it('a late stop of an earlier run never touches the next run of the task (same container id)', async () => {
    const d = driver();
    const cfg = task('again', 'echo up > /local/up; exec sleep 60');
    const first = await d.start(cfg);
    handles.push(first);
    await until('run 1 up', () => read(join(cfg.local, 'up')));
    await d.stop(first, 'SIGTERM', 2_000);
    rmSync(join(cfg.local, 'up'));
    const second = await d.start(cfg);
    handles.push(second);
    await until('run 2 up', () => read(join(cfg.local, 'up')));
    expect(containers()).toEqual([second.runc!.id]);
    // The old handle: its run has ended, and that is all a stop or wait of it does.
    await d.stop(first, 'SIGKILL', 0);
    await d.wait(first);
    expect(d.isRunning(second)).toBe(true);
    expect(containers()).toEqual([second.runc!.id]);
    expect(await d.containerRuns(second)).toBe(true);
  });

  it('without runc, an isolated task is refused with an error that names the runc package', async () => {
    const d = driver({ runcPath: join(root, 'no-runc') });
    const err = await d.start(task('none', 'true')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TaskStartError);
    expect((err as Error).message).toMatch(/runc, which is not installed on this machine.*apt-get install runc.*raw_exec/);
  });
});
