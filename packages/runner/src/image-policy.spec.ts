import { DEFAULT_IMAGE_DRIVER, type TaskImageMount, type TaskSpec } from '@csiplug/jobspec';
import { imageMountsOf, imagePrivileged, imagePrivilegeRefusal, resolveImageMountPaths } from './image-policy';

// A host where /data/real is a dir, /data/link leads to /etc, and the task dir holds cfg/.
const fsLinks: Record<string, string> = {
  '/t/task': '/t/task',
  '/t/task/cfg': '/t/task/cfg',
  '/t/task/out': '/etc',
  '/data': '/data',
  '/data/real': '/data/real',
  '/data/link': '/etc',
};
const realpath = (p: string) => {
  const r = fsLinks[p];
  if (r === undefined) throw Object.assign(new Error(`ENOENT ${p}`), { code: 'ENOENT' });
  return r;
};
const bind = (source: string, target = '/m', extra: Partial<TaskImageMount> = {}): TaskImageMount => ({
  type: 'bind',
  source,
  target,
  readOnly: false,
  ...extra,
});
const enabled = { volumesEnabled: true, allowedHostPaths: ['/data'] };

describe('imageMountsOf', () => {
  it("binds a relative source under the task dir, with its propagation in the driver's terms, and a tmpfs with its size", () => {
    const r = imageMountsOf(
      [
        bind('cfg', '/etc/app', { readOnly: true, propagation: 'rshared' }),
        { type: 'tmpfs', target: '/scratch', readOnly: false, tmpfsSize: 4096 },
      ],
      '/t/task',
      DEFAULT_IMAGE_DRIVER,
      realpath,
    );
    expect(r.refusal).toBeUndefined();
    expect(r.mounts).toEqual([
      { source: '/t/task/cfg', destination: '/etc/app', readOnly: true, propagation: 'bidirectional' },
      { type: 'tmpfs', source: '', destination: '/scratch', readOnly: false, tmpfsSize: 4096 },
    ]);
  });

  it('refuses a host path unless volumes are enabled and its real path is within allowed_host_paths', () => {
    expect(imageMountsOf([bind('/data/real')], '/t/task', DEFAULT_IMAGE_DRIVER, realpath).refusal).toMatch(
      /bind mount of \/data\/real at \/m is a host path outside the task dir.*volumes \{ enabled = true \}/,
    );
    expect(imageMountsOf([bind('/data/real')], '/t/task', enabled, realpath)).toEqual({
      mounts: [{ source: '/data/real', destination: '/m', readOnly: false }],
    });
    // A link inside an allowed path that leads out of it is judged by where it leads.
    expect(imageMountsOf([bind('/data/link')], '/t/task', enabled, realpath).refusal).toMatch(
      /\/data\/link \(really \/etc\) at \/m is not within this agent's allowed_host_paths \(\/data\)/,
    );
    // So is a relative one that climbs or links out of the task dir.
    expect(imageMountsOf([bind('../../data/real')], '/t/task', DEFAULT_IMAGE_DRIVER, realpath).refusal).toMatch(/outside the task dir/);
    expect(imageMountsOf([bind('out')], '/t/task', DEFAULT_IMAGE_DRIVER, realpath).refusal).toMatch(/outside the task dir/);
    expect(imageMountsOf([bind('/nope')], '/t/task', enabled, realpath).refusal).toMatch(/its source \/nope does not exist on this node/);
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
