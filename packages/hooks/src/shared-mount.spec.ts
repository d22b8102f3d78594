import { parseMountInfo } from '@csiplug/core';
import { isShared, propagationProblem } from './shared-mount';

const line = (id: number, mountPoint: string, optional: string) =>
  `${id} 1 8:1 ${mountPoint} ${mountPoint} rw,relatime ${optional}${optional ? ' ' : ''}- ext4 /dev/sda1 rw`;
const host = (optional: string) => parseMountInfo([line(20, '/', 'shared:1'), line(30, '/data/csi/monolith/hp', optional)].join('\n'));
const task = (optional: string) => [line(100, '/', ''), line(110, '/local', ''), line(120, '/local/csi', optional)].join('\n');

describe('propagationProblem: an isolated plugin is registered only when its staging/publish mount is shared on both sides', () => {
  it('none when both sides are shared (the task side may also be a slave of its peer)', () => {
    expect(propagationProblem('/data/csi/monolith/hp', '/local/csi', task('shared:7'), host('shared:7'))).toBeUndefined();
    expect(propagationProblem('/data/csi/monolith/hp', '/local/csi', task('shared:9 master:7'), host('shared:7'))).toBeUndefined();
  });

  it('says which side is not, and how', () => {
    expect(propagationProblem('/data/csi/monolith/hp', '/local/csi', task('shared:7'), host(''))).toBe(
      'on the host, the mount at /data/csi/monolith/hp has no shared propagation (private)',
    );
    expect(propagationProblem('/data/csi/monolith/hp', '/local/csi', task('master:7'), host('shared:7'))).toBe(
      "in the plugin's container, the mount at /local/csi has no shared propagation (master:7): what the plugin mounts there stays in its container",
    );
    expect(propagationProblem('/data/csi/monolith/other', '/local/csi', task('shared:7'), host('shared:7'))).toBe(
      'on the host, /data/csi/monolith/other is not a mount point',
    );
    expect(propagationProblem('/data/csi/monolith/hp', '/csi-base', task('shared:7'), host('shared:7'))).toBe(
      "in the plugin's container, /csi-base is not a mount point",
    );
  });

  it('isShared reads the optional fields', () => {
    expect(isShared({ optionalFields: ['shared:3', 'master:1'] })).toBe(true);
    expect(isShared({ optionalFields: ['master:1'] })).toBe(false);
  });
});
