import { DEFAULT_IMAGE_DRIVER, type TaskImageMount, type TaskSpec } from '@csiplug/jobspec';
import type { TaskMount } from '@csiplug/driver';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { checkImageBindSources, imageMountsOf, imagePrivileged, imagePrivilegeRefusal, resolveImageMountPaths } from './image-policy';

const bind = (source: string, target = '/m', extra: Partial<TaskImageMount> = {}): TaskImageMount => ({
  type: 'bind',
  source,
  target,
  readOnly: false,
  ...extra,
});
const enabled = { volumesEnabled: true, allowedHostPaths: ['/data'] };
const dirs = { taskDir: '/a/task', sharedDir: '/a/alloc' };

describe('imageMountsOf: the binds judged as written', () => {
  it("binds local/, secrets/ and the alloc's ../alloc/ (checked again at start), with propagation in the driver's terms, and a tmpfs", () => {
    const r = imageMountsOf(
      [
        bind('local/cfg', '/etc/app', { readOnly: true, propagation: 'rshared' }),
        bind('secrets', '/s'),
        bind('../alloc/data', '/d'),
        { type: 'tmpfs', target: '/scratch', readOnly: false, tmpfsSize: 4096 },
      ],
      dirs,
      DEFAULT_IMAGE_DRIVER,
    );
    expect(r.refusal).toBeUndefined();
    expect(r.mounts).toEqual([
      {
        source: '/a/task/local/cfg',
        destination: '/etc/app',
        readOnly: true,
        propagation: 'bidirectional',
        imageBind: { written: 'local/cfg', within: '/a' },
      },
      { source: '/a/task/secrets', destination: '/s', readOnly: false, imageBind: { written: 'secrets', within: '/a' } },
      { source: '/a/alloc/data', destination: '/d', readOnly: false, imageBind: { written: '../alloc/data', within: '/a' } },
      { type: 'tmpfs', source: '', destination: '/scratch', readOnly: false, tmpfsSize: 4096 },
    ]);
  });

  it("refuses the task dir itself, the agent's .executor/ and image/ in it, another task's dir, and anything else relative", () => {
    for (const source of ['.', '.executor', '.executor/pid.json', 'image/upper', 'cfg', '../other/local', '../alloc-x', '../../etc'])
      expect(imageMountsOf([bind(source)], dirs, enabled).refusal).toBe(
        `the bind mount of ${source} at /m is not the task's own: a source relative to the task dir must be under local/, secrets/ or the alloc's ../alloc/ (the task dir itself and the agent's .executor/ and image/ are not the task's to write); put the files under local/ and mount that`,
      );
  });

  it('binds a name that starts with two dots (local/..data, as Kubernetes writes config dirs): only ".." itself climbs', () => {
    expect(imageMountsOf([bind('local/..data', '/etc/app')], dirs, DEFAULT_IMAGE_DRIVER)).toMatchObject({
      mounts: [{ source: '/a/task/local/..data', destination: '/etc/app' }],
    });
  });

  it('refuses a host path unless volumes are enabled; allowed_host_paths is for the start to check', () => {
    expect(imageMountsOf([bind('/data/real')], dirs, DEFAULT_IMAGE_DRIVER).refusal).toMatch(
      /bind mount of \/data\/real at \/m is a host path outside the task dir.*volumes \{ enabled = true \}/,
    );
    // An absolute path into the task dir is a host path too: it does not get round volumes { enabled }.
    expect(imageMountsOf([bind('/a/task/local')], dirs, DEFAULT_IMAGE_DRIVER).refusal).toMatch(/is a host path outside the task dir/);
    expect(imageMountsOf([bind('/data/real')], dirs, enabled)).toEqual({
      mounts: [{ source: '/data/real', destination: '/m', readOnly: false, imageBind: { written: '/data/real', allowed: ['/data'] } }],
    });
  });
});

describe('checkImageBindSources: each bind as it is at the start', () => {
  let root: string;
  let allocDir: string;
  let local: string;
  let data: string;
  const checked = (source: string, extra: Partial<TaskMount> = {}) =>
    checkImageBindSources([
      { source: '/v', destination: '/volume' },
      ...imageMountsOf(
        [bind(source)],
        { taskDir: path.join(allocDir, 'task'), sharedDir: path.join(allocDir, 'alloc') },
        {
          volumesEnabled: true,
          allowedHostPaths: [data],
        },
      ).mounts.map((m) => ({ ...m, ...extra })),
    ]);

  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-image-binds-'));
    allocDir = path.join(root, 'alloc-1');
    local = path.join(allocDir, 'task', 'local');
    data = path.join(root, 'data');
    for (const d of [local, path.join(allocDir, 'alloc'), path.join(data, 'real')]) fs.mkdirSync(d, { recursive: true });
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  it('passes a source that is there (a file a template rendered) to the driver as a plain bind; other mounts as they are', () => {
    fs.writeFileSync(path.join(local, 'app.conf'), 'x');
    expect(checked('local/app.conf', { readOnly: true })).toEqual({
      mounts: [
        { source: '/v', destination: '/volume' },
        { source: path.join(local, 'app.conf'), destination: '/m', readOnly: true },
      ],
    });
  });

  it('says a missing source is missing, naming the mount and its source', () => {
    expect(checked('local/app.conf')).toEqual({
      error: `the bind mount of local/app.conf at /m: its source ${path.join(local, 'app.conf')} does not exist; create it in the task (a template's destination, a prestart task) before the task starts`,
    });
  });

  it('refuses a link the task made in its own dirs since the last start, wherever it is in the path', () => {
    fs.mkdirSync(path.join(local, 'data'));
    expect(checked('local/data/x')).toMatchObject({ error: expect.stringMatching(/does not exist/) });
    fs.rmdirSync(path.join(local, 'data'));
    fs.symlinkSync('/', path.join(local, 'data'));
    expect(checked('local/data')).toEqual({
      error: `the bind mount of local/data at /m: ${path.join(local, 'data')} is a symbolic link, and a bind follows links out of the task's dirs: replace the link with the dir or file itself`,
    });
    expect(checked('local/data/etc')).toMatchObject({ error: expect.stringMatching(/local\/data is a symbolic link/) });
  });

  it('takes a host path by its real path now, within allowed_host_paths', () => {
    fs.symlinkSync('/etc', path.join(data, 'link'));
    expect(checked(path.join(data, 'real'))).toEqual({
      mounts: [
        { source: '/v', destination: '/volume' },
        { source: fs.realpathSync(path.join(data, 'real')), destination: '/m', readOnly: false },
      ],
    });
    expect(checked(path.join(data, 'link'))).toEqual({
      error: expect.stringMatching(/\/data\/link at \/m \(really \/etc\) is not within this agent's allowed_host_paths/),
    });
    expect(checked(path.join(data, 'nope'))).toEqual({ error: expect.stringMatching(/data\/nope does not exist on this node/) });
  });
});

describe('image privileges', () => {
  const task = (extra: Partial<TaskSpec> = {}, privileged = true) =>
    ({ image: { privileged }, config: { command: '', args: [] }, ...extra }) as unknown as TaskSpec;
  const plugin = { csiPlugin: { id: 'p' } } as unknown as Partial<TaskSpec>;

  it('is privileged only for a csi_plugin task that asks, where allow_privileged; refused otherwise', () => {
    const allow = { ...DEFAULT_IMAGE_DRIVER, allowPrivileged: true };
    expect(imagePrivileged(task(plugin), allow)).toBe(true);
    expect(imagePrivileged(task(plugin, false), allow)).toBe(false);
    expect(imagePrivileged(task(), allow)).toBe(false);
    expect(imagePrivileged(task(plugin), DEFAULT_IMAGE_DRIVER)).toBe(false);
    expect(imagePrivilegeRefusal(task(), allow)).toMatch(/for csi_plugin tasks only/);
    expect(imagePrivilegeRefusal(task(plugin), DEFAULT_IMAGE_DRIVER)).toMatch(/allow_privileged = true/);
    expect(imagePrivilegeRefusal(task(plugin), allow)).toBeUndefined();
  });

  it('gives the host pid or ipc namespace only to a csi_plugin task, where allow_privileged', () => {
    const allow = { ...DEFAULT_IMAGE_DRIVER, allowPrivileged: true };
    for (const [field, image] of [
      ['pid_mode', { pidHost: true }],
      ['ipc_mode', { ipcHost: true }],
    ] as const) {
      const t = (extra: Partial<TaskSpec> = {}) => ({ image, config: { command: '', args: [] }, ...extra }) as unknown as TaskSpec;
      expect(imagePrivilegeRefusal(t(), allow)).toMatch(new RegExp(`^${field} = "host" is for csi_plugin tasks only`));
      expect(imagePrivilegeRefusal(t(plugin), DEFAULT_IMAGE_DRIVER)).toMatch(
        new RegExp(`^${field} = "host" needs .*allow_privileged = true`),
      );
      expect(imagePrivilegeRefusal(t(plugin), allow)).toBeUndefined();
    }
  });

  it('takes cap_add within allow_caps, whatever case or prefix', () => {
    const t = (capAdd: string[]) => ({ image: {}, config: { command: '', args: [], capAdd } }) as unknown as TaskSpec;
    expect(imagePrivilegeRefusal(t(['chown', 'CAP_KILL']), DEFAULT_IMAGE_DRIVER)).toBeUndefined();
    expect(imagePrivilegeRefusal(t(['sys_admin']), DEFAULT_IMAGE_DRIVER)).toMatch(/cap_add asks for sys_admin.*allow_caps/);
  });
});

describe('resolveImageMountPaths', () => {
  const bind = (source: string, target: string): TaskImageMount => ({ type: 'bind', source, target, readOnly: false });

  it('resolves the path variables in source and target before any path is made', () => {
    const vars = { NOMAD_ALLOC_DIR: '/alloc', 'node.unique.name': 'n1' };
    expect(resolveImageMountPaths([bind('local/${node.unique.name}', '${NOMAD_ALLOC_DIR}/data')], vars)).toEqual({
      mounts: [bind('local/n1', '/alloc/data')],
    });
  });

  it('refuses a name with no value, naming the mount field and the name', () => {
    const out = resolveImageMountPaths([bind('a', '/x'), bind('b', '/data/${meta.rack}')], {});
    expect(out).toEqual({ error: expect.stringMatching(/^config\.mount\[1\]\.target: \$\{meta\.rack\} has no value on this node/) });
  });
});
