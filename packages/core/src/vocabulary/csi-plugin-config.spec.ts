import { ValidationError } from '../errors';
import { parseCsiPluginConfig } from './csi-plugin-config';

const where = 'job "j" group "g" task "plugin"';

describe('parseCsiPluginConfig', () => {
  it('fills the defaults', () => {
    expect(parseCsiPluginConfig({ id: 'hostpath', type: 'monolith' }, where)).toEqual({
      id: 'hostpath',
      type: 'monolith',
      mountDir: '/csi',
      stagePublishBaseDir: '/local/csi',
      healthTimeout: 30_000,
    });
  });

  it('takes every field', () => {
    expect(
      parseCsiPluginConfig(
        { id: 'p', type: 'node', mount_dir: '/plugin/', stage_publish_base_dir: '/srv/csi', health_timeout: '2m' },
        where,
      ),
    ).toMatchObject({ mountDir: '/plugin', stagePublishBaseDir: '/srv/csi', healthTimeout: 120_000 });
  });

  it.each([
    [{ type: 'node' }, /csi_plugin\.id is required/],
    [{ id: '../x', type: 'node' }, /csi_plugin\.id is not usable/],
    [{ id: 'a/b', type: 'node' }, /csi_plugin\.id/],
    [{ id: 'p' }, /csi_plugin\.type must be one of node, controller, monolith/],
    [{ id: 'p', type: 'storage' }, /csi_plugin\.type/],
    [{ id: 'p', type: 'node', mount_dir: 'relative' }, /csi_plugin\.mount_dir must be an absolute path/],
    [{ id: 'p', type: 'node', mount_dir: '/csi', stage_publish_base_dir: '/csi/stage' }, /must not sit inside mount_dir/],
    [{ id: 'p', type: 'node', mount_dir: '/csi', stage_publish_base_dir: '/csi' }, /must not sit inside mount_dir/],
    [{ id: 'p', type: 'node', health_timeout: 'soon' }, /csi_plugin\.health_timeout is not a duration/],
    [{ id: 'p', type: 'node', health_timeout: 0 }, /health_timeout must be positive/],
    [{ id: 'p', type: 'node', helth_timeout: '1s' }, /csi_plugin\.helth_timeout is not a known field/],
    ['nope', /csi_plugin must be a block/],
  ])('rejects %p naming the field', (raw, message) => {
    expect(() => parseCsiPluginConfig(raw, where)).toThrow(ValidationError);
    expect(() => parseCsiPluginConfig(raw, where)).toThrow(message);
    expect(() => parseCsiPluginConfig(raw, where)).toThrow(where);
  });

  it('accepts a base dir beside mount_dir that only shares a prefix', () => {
    expect(
      parseCsiPluginConfig({ id: 'p', type: 'node', mount_dir: '/csi', stage_publish_base_dir: '/csi-stage' }, where).stagePublishBaseDir,
    ).toBe('/csi-stage');
  });
});
