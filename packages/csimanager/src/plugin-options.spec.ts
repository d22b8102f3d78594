// The mount roots a registration's options give a plugin (pluginMountRoots:
// the defaults under the data dir, the options that move them, the values
// refused and what the error says) and the volume paths under them
// (volumePaths: staging and per-alloc trees, on the host and as the plugin
// sees them; ids checked before they become path components).
import { ValidationError } from '@csiplug/core';
import type { RegisteredPlugin } from '@csiplug/registry';
import { PluginOptionsError } from './errors';
import { pluginMountRoots } from './plugin-options';
import { volumePaths } from './volume-paths';

const reg = (over: Partial<RegisteredPlugin> = {}): RegisteredPlugin =>
  ({ type: 'csi-node', name: 'nfs', version: 'v1', allocId: 'alloc-1', socketPath: '/s/csi.sock', ...over }) as RegisteredPlugin;

describe('pluginMountRoots', () => {
  it('defaults to <dataDir>/csi/<node|controller>/<name> by the registration type, seen the same by the plugin', () => {
    expect(pluginMountRoots(reg(), '/data')).toEqual({
      deployment: 'node',
      hostRoot: '/data/csi/node/nfs',
      pluginRoot: '/data/csi/node/nfs',
    });
    expect(pluginMountRoots(reg({ type: 'csi-controller', options: {} }), '/data')).toEqual({
      deployment: 'controller',
      hostRoot: '/data/csi/controller/nfs',
      pluginRoot: '/data/csi/controller/nfs',
    });
  });

  it('takes the deployment, the base dir and the container mount point from the options, normalised', () => {
    expect(pluginMountRoots(reg({ options: { pluginType: 'monolith' } }), '/data')).toEqual({
      deployment: 'monolith',
      hostRoot: '/data/csi/monolith/nfs',
      pluginRoot: '/data/csi/monolith/nfs',
    });
    expect(
      pluginMountRoots(reg({ options: { stagePublishBaseDir: '/mnt//csi/./x/', containerMountPoint: '/csi/../plugin' } }), '/data'),
    ).toEqual({ deployment: 'node', hostRoot: '/mnt/csi/x/', pluginRoot: '/plugin' });
  });

  it('refuses a deployment it does not know, naming the option and the known ones', () => {
    const err = (() => {
      try {
        pluginMountRoots(reg({ options: { pluginType: 'edge' } }), '/data');
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(PluginOptionsError);
    expect((err as Error).message).toBe('plugin "nfs" (alloc alloc-1): option pluginType="edge" is not one of node, controller, monolith');
  });

  it.each([
    ['stagePublishBaseDir', 'relative/dir'],
    ['stagePublishBaseDir', '/with\0nul'],
    ['containerMountPoint', 'csi'],
  ])('refuses %s=%j: it must be an absolute path', (key, value) => {
    expect(() => pluginMountRoots(reg({ options: { [key]: value } }), '/data')).toThrow(
      new PluginOptionsError(
        `plugin "nfs" (alloc alloc-1): option ${key}="${value}" must be an absolute path; fix the plugin supervisor's registration`,
      ),
    );
    expect(() => pluginMountRoots(reg({ options: { [key]: value } }), '/data')).toThrow(PluginOptionsError);
  });

  it('refuses a plugin name that cannot be a path component', () => {
    expect(() => pluginMountRoots(reg({ name: '../etc' }), '/data')).toThrow(ValidationError);
  });
});

describe('volumePaths', () => {
  const roots = { deployment: 'node' as const, hostRoot: '/host/nfs', pluginRoot: '/csi' };
  const usage = { readOnly: true, attachmentMode: 'block-device', accessMode: 'multi-node-reader-only' };

  it('puts staging under staging/<volume>/<usage> and targets under per-alloc/<alloc>/<volume>/<usage>, on both sides', () => {
    expect(volumePaths(roots, 'vol-1', 'alloc-a', usage)).toEqual({
      hostStagingPath: '/host/nfs/staging/vol-1/ro-block-device-multi-node-reader-only',
      pluginStagingPath: '/csi/staging/vol-1/ro-block-device-multi-node-reader-only',
      hostAllocVolumeDir: '/host/nfs/per-alloc/alloc-a/vol-1',
      hostTargetPath: '/host/nfs/per-alloc/alloc-a/vol-1/ro-block-device-multi-node-reader-only',
      pluginTargetPath: '/csi/per-alloc/alloc-a/vol-1/ro-block-device-multi-node-reader-only',
    });
  });

  it('checks the volume id, the alloc id and the usage', () => {
    expect(() => volumePaths(roots, '..', 'alloc-a', usage)).toThrow(/volume id/);
    expect(() => volumePaths(roots, 'vol-1', 'a/b', usage)).toThrow(/alloc id/);
    expect(() => volumePaths(roots, 'vol-1', 'alloc-a', { ...usage, accessMode: 'x' })).toThrow(ValidationError);
  });
});
