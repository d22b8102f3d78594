import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ALL_CAPS,
  DEFAULT_TASK_CAPS,
  capabilityName,
  grantableCaps,
  isolatedProcessArgs,
  ociConfig,
  taskProcessArgs,
  type IsolationConfig,
} from './isolation';

const base = (extra: Partial<IsolationConfig> = {}): IsolationConfig => ({
  chroot: { '/usr': '/usr' },
  localDir: '/d/local',
  allocDir: '/d/alloc',
  secretsDir: '/d/secrets',
  ...extra,
});
const task = { hostname: 't', args: ['/bin/true'], env: { A: 'b' } };
type Mount = { destination: string; source: string; options?: string[] };
const mounts = (c: Record<string, unknown>) => c['mounts'] as Mount[];
const caps = (c: Record<string, unknown>) => (c['process'] as { capabilities: { bounding: string[] } }).capabilities.bounding;

describe('ociConfig', () => {
  it('binds the chroot read-only and the task dirs read-write, in their own namespaces with the network too', () => {
    // Host path → path in the task, as Nomad's chroot_env: the host's /usr/share is shown at /tmp/code.
    const c = ociConfig(task, base({ chroot: { '/usr': '/usr', '/usr/share': '/tmp/code' } }));
    const byDest = new Map(mounts(c).map((m) => [m.destination, m]));
    expect(byDest.get('/usr')!.options).toContain('ro');
    expect(byDest.get('/tmp/code')).toMatchObject({ source: '/usr/share', options: expect.arrayContaining(['ro']) });
    // A chroot dir below /tmp is bound after the task's tmpfs /tmp, so it is seen on top of it.
    const order = mounts(c).map((m) => m.destination);
    expect(order.indexOf('/tmp/code')).toBeGreaterThan(order.indexOf('/tmp'));
    expect(byDest.get('/local')).toMatchObject({ source: '/d/local', options: expect.arrayContaining(['rw']) });
    expect((c['linux'] as { namespaces: { type: string }[] }).namespaces.map((n) => n.type).sort()).toEqual([
      'ipc',
      'mount',
      'network',
      'pid',
      'uts',
    ]);
    // The host's network: no network namespace of its own.
    expect(
      (ociConfig(task, base({ network: 'host' }))['linux'] as { namespaces: { type: string }[] }).namespaces.map((n) => n.type).sort(),
    ).toEqual(['ipc', 'mount', 'pid', 'uts']);
    expect((c['root'] as { readonly: boolean }).readonly).toBe(true);
    expect((c['process'] as { env: string[] }).env).toEqual(['A=b']);
  });

  it('runs the task as its user, as nobody without one, as root when privileged; its own dirs are nosuid,nodev, a volume nosuid only (it may be a block device)', () => {
    const user = (c: Record<string, unknown>) => (c['process'] as { user: unknown }).user;
    expect(user(ociConfig(task, base()))).toEqual({ uid: 65534, gid: 65534 });
    expect(user(ociConfig(task, base({ privileged: true })))).toEqual({ uid: 0, gid: 0 });
    expect(user(ociConfig(task, base({ user: { uid: 33, gid: 33, additionalGids: [44] } })))).toEqual({
      uid: 33,
      gid: 33,
      additionalGids: [44],
    });
    expect(() => ociConfig(task, base({ user: { uid: -1, gid: 0 } }))).toThrow('user: -1 is not a valid uid or gid');
    const byDest = new Map(
      mounts(ociConfig(task, base({ mounts: [{ source: '/x', destination: '/data' }] }))).map((m) => [m.destination, m]),
    );
    for (const d of ['/local', '/alloc', '/secrets']) expect(byDest.get(d)!.options).toEqual(expect.arrayContaining(['nosuid', 'nodev']));
    expect(byDest.get('/data')!.options).toContain('nosuid');
    expect(byDest.get('/data')!.options).not.toContain('nodev');
  });

  it('mounts parents before children, whoever asked for them: a volume at /opt does not hide a chroot dir at /opt/plugin', () => {
    const order = mounts(ociConfig(task, base({ chroot: { '/usr': '/opt/plugin' }, mounts: [{ source: '/x', destination: '/opt' }] }))).map(
      (m) => m.destination,
    );
    expect(order.indexOf('/opt')).toBeLessThan(order.indexOf('/opt/plugin'));
    expect(order.slice(0, 3)).toEqual(['/proc', '/sys', '/tmp']);
  });

  it("refuses a chroot or mount on the task's own dirs, a relative path, a way out with .., and one destination twice", () => {
    // The task path (the value) is the one checked against the task's own dirs.
    expect(() => ociConfig(task, base({ chroot: { '/usr': '/local/x' } }))).toThrow(/chroot_env: \/local\/x is the task's own/);
    expect(() => ociConfig(task, base({ chroot: { '/usr': 'usr' } }))).toThrow(/not an absolute path/);
    expect(() => ociConfig(task, base({ chroot: { usr: '/usr' } }))).toThrow(/not an absolute path/);
    expect(() => ociConfig(task, base({ mounts: [{ source: '/x', destination: '/proc/sys' }] }))).toThrow(
      /mount destination \/proc\/sys is the task's own/,
    );
    // .. is resolved first: no way round the check.
    expect(() => ociConfig(task, base({ mounts: [{ source: '/x', destination: '/data/../../proc/x' }] }))).toThrow(
      /mount destination \/proc\/x is the task's own/,
    );
    expect(() =>
      ociConfig(
        task,
        base({
          mounts: [
            { source: '/x', destination: '/data' },
            { source: '/y', destination: '/data/' },
          ],
        }),
      ),
    ).toThrow(/mounted twice/);
  });

  it('gives the default capabilities, with cap_add and less cap_drop; a privileged task every one it may grant, and the host /dev', () => {
    const c = ociConfig(task, base({ capAdd: ['net_admin'], capDrop: ['CAP_CHOWN'] }));
    expect(caps(c)).toContain('CAP_NET_ADMIN');
    expect(caps(c)).not.toContain('CAP_CHOWN');
    expect(caps(c)).toHaveLength(DEFAULT_TASK_CAPS.length);
    const p = ociConfig(task, base({ privileged: true }));
    expect(caps(p)).toEqual(grantableCaps());
    expect(mounts(p).find((m) => m.destination === '/dev')).toMatchObject({ type: 'bind', source: '/dev' });
    expect((p['linux'] as { resources: unknown }).resources).toMatchObject({ devices: [{ allow: true, access: 'rwm' }] });
    expect(mounts(p).find((m) => m.destination === '/sys')!.options).toContain('rw');
    expect((c['linux'] as { resources?: { devices?: unknown } }).resources?.devices).toBeUndefined();
    expect(mounts(c).find((m) => m.destination === '/sys')!.options).toContain('ro');
    expect(() => capabilityName('teleport')).toThrow(/not a Linux capability/);
  });

  it('a bidirectional mount makes the task mount tree shared; host-to-task makes it a slave; resources become cgroup limits', () => {
    const bi = ociConfig(
      task,
      base({
        mounts: [{ source: '/x', destination: '/csi-base', propagation: 'bidirectional' }],
        resources: { cpuShares: 500, memoryBytes: 64 << 20 },
      }),
    );
    const linux = bi['linux'] as { rootfsPropagation: string; resources: unknown };
    expect(linux.rootfsPropagation).toBe('rshared');
    expect(mounts(bi).find((m) => m.destination === '/csi-base')!.options).toContain('rshared');
    expect(linux.resources).toMatchObject({ memory: { limit: 64 << 20 }, cpu: { shares: 500 } });
    expect(
      (
        ociConfig(task, base({ mounts: [{ source: '/x', destination: '/d', propagation: 'host-to-task' }] }))['linux'] as {
          rootfsPropagation: string;
        }
      ).rootfsPropagation,
    ).toBe('rslave');
  });
});

describe('ociConfig of an image task', () => {
  const image = (extra: Partial<IsolationConfig> = {}) => base({ image: { rootfs: '/d/image/rootfs', cwd: '/srv/app' }, ...extra });
  const namespaces = (c: Record<string, unknown>) =>
    (c['linux'] as { namespaces: { type: string }[] }).namespaces.map((n) => n.type).sort();

  it("runs on the image's writable root in its working dir, with no chroot_env and no /tmp of its own, and its own dirs bound as for exec", () => {
    const c = ociConfig(task, image({ chroot: { '/usr': '/usr', '/bin': '/bin' } }));
    expect(c['root']).toEqual({ path: '/d/image/rootfs', readonly: false });
    expect((c['process'] as { cwd: string }).cwd).toBe('/srv/app');
    const dests = mounts(c).map((m) => m.destination);
    expect(dests).not.toContain('/usr');
    expect(dests).not.toContain('/bin');
    expect(dests).not.toContain('/tmp');
    expect(dests).toEqual(expect.arrayContaining(['/proc', '/dev', '/local', '/alloc', '/secrets']));
    // An exec task keeps its read-only empty root, /local as its cwd and its /tmp.
    const e = ociConfig(task, base());
    expect(e['root']).toEqual({ path: 'rootfs', readonly: true });
    expect((e['process'] as { cwd: string }).cwd).toBe('/local');
    expect(mounts(e).map((m) => m.destination)).toContain('/tmp');
    expect(() => ociConfig(task, image({ image: { rootfs: 'rel/rootfs', cwd: '/' } }))).toThrow(
      /image root: "rel\/rootfs" is not an absolute path/,
    );
  });

  it("binds the host's resolv.conf and hosts read-only on the host's network only; pid_mode/ipc_mode host drop those namespaces", () => {
    const host = mounts(ociConfig(task, image({ network: 'host' })));
    for (const f of ['/etc/resolv.conf', '/etc/hosts'])
      expect(host.find((m) => m.destination === f)).toMatchObject({ source: f, options: expect.arrayContaining(['ro']) });
    expect(mounts(ociConfig(task, image())).map((m) => m.destination)).not.toContain('/etc/hosts');
    // An exec task's root has the chroot's /etc, not the host's files one by one.
    expect(mounts(ociConfig(task, base({ network: 'host' }))).map((m) => m.destination)).not.toContain('/etc/hosts');
    expect(namespaces(ociConfig(task, image({ pidHost: true, ipcHost: true })))).toEqual(['mount', 'network', 'uts']);
    expect(namespaces(ociConfig(task, image({ pidHost: true })))).toEqual(['ipc', 'mount', 'network', 'uts']);
  });

  it('mounts a tmpfs where asked, with its size, and refuses a size that is not a positive number of bytes', () => {
    const c = ociConfig(task, image({ mounts: [{ type: 'tmpfs', source: '', destination: '/scratch', tmpfsSize: 1 << 20 }] }));
    expect(mounts(c).find((m) => m.destination === '/scratch')).toMatchObject({
      type: 'tmpfs',
      options: expect.arrayContaining(['rw', 'nosuid', 'nodev', `size=${1 << 20}`]),
    });
    expect(() => ociConfig(task, image({ mounts: [{ type: 'tmpfs', source: '', destination: '/s', tmpfsSize: -1 }] }))).toThrow(
      /tmpfs mount at \/s: size -1 is not a positive number of bytes/,
    );
  });

  it('as Docker: cap_drop ALL leaves only what cap_add adds back', () => {
    expect(caps(ociConfig(task, image({ capDrop: ['ALL'], capAdd: ['chown'] })))).toEqual(['CAP_CHOWN']);
    expect(caps(ociConfig(task, image({ capDrop: ['all'] })))).toEqual([]);
  });

  it('as Docker: no_new_privs is off for an image task (an exec task keeps it)', () => {
    const process = (c: Record<string, unknown>) => c['process'] as { noNewPrivileges: boolean };
    expect(process(ociConfig(task, image())).noNewPrivileges).toBe(false);
    expect(process(ociConfig(task, base())).noNewPrivileges).toBe(true);
  });

  it("as Docker: on the host's network an image task's hostname is the host's; on its own, the task's name", () => {
    expect(ociConfig(task, image({ network: 'host' }))['hostname']).toBe(hostname());
    expect(ociConfig(task, image())['hostname']).toBe('t');
    expect(ociConfig(task, base({ network: 'host' }))['hostname']).toBe('t');
  });

  it('runs the process as pid 1 as Docker does, with no init of ours (the image may have no shell)', () => {
    expect(isolatedProcessArgs('/app', ['a'], image({ chroot: { '/bin': '/bin' } }))).toEqual(['/app', 'a']);
    expect(isolatedProcessArgs('/app', ['a'], base({ chroot: { '/bin': '/bin' } })).slice(3)).toEqual(['csiplug-init', '/app', 'a']);
  });
});

describe('grantableCaps and the task init', () => {
  it('reads the bounding set: bit n is ALL_CAPS[n]', () => {
    const dir = mkdtempSync(join(tmpdir(), 'csiplug-caps-'));
    try {
      writeFileSync(join(dir, 'status'), 'Name:\tx\nCapBnd:\t0000000000000005\n');
      expect(grantableCaps(join(dir, 'status'))).toEqual([ALL_CAPS[0], ALL_CAPS[2]]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('runs the command under the init when the root has /bin/sh, as it is when not', () => {
    expect(taskProcessArgs('/app', ['a'], { '/bin': '/bin' }).slice(3)).toEqual(['csiplug-init', '/app', 'a']);
    expect(taskProcessArgs('/app', ['a'], { '/usr': '/usr' })).toEqual(['/app', 'a']);
  });

  it("finds the task's /bin by the entry whose task path (the value) is /bin, and looks for sh in that entry's host path", () => {
    const dir = mkdtempSync(join(tmpdir(), 'busybox-'));
    try {
      // A busybox-like host dir shown at the task's /bin: "/opt/busybox/bin" = "/bin".
      mkdirSync(join(dir, 'bin'));
      writeFileSync(join(dir, 'bin', 'sh'), '');
      expect(taskProcessArgs('/app', ['a'], { [join(dir, 'bin')]: '/bin' }).slice(0, 2)).toEqual(['/bin/sh', '-c']);
      expect(taskProcessArgs('/app', ['a'], { [join(dir, 'bin')]: '/bin/' }).slice(3)).toEqual(['csiplug-init', '/app', 'a']);
      // The host's /bin shown elsewhere is no /bin in the task: no init, though that dir (the value) has a sh.
      expect(taskProcessArgs('/app', ['a'], { '/bin': join(dir, 'bin') })).toEqual(['/app', 'a']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
