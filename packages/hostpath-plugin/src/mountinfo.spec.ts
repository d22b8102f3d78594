// The plugin's mountinfo names keep their shapes now that the parser and
// queries live in @csiplug/core (whose spec covers them in full).
import { backingOf, mountsUnder, parseMountInfo, topMountAt } from './mountinfo';

const SAMPLE = [
  '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
  '40 22 0:35 / /tmp rw,nosuid,nodev shared:20 - tmpfs tmpfs rw',
  '41 40 0:35 /csiplug-a/state/volumes/v1 /tmp/csiplug-a/staging/v1 rw,relatime shared:20 - tmpfs tmpfs rw',
  '42 40 0:35 /csiplug-a/state/volumes/v1 /tmp/csiplug-a/target\\040one ro,relatime shared:20 - tmpfs tmpfs rw',
  '43 42 0:35 /other /tmp/csiplug-a/target\\040one rw shared:20 - tmpfs tmpfs rw',
].join('\n');

describe('mountinfo', () => {
  const mounts = parseMountInfo(SAMPLE);

  it('parses full entries', () => {
    expect(mounts[3]).toMatchObject({
      id: 42,
      parentId: 40,
      device: '0:35',
      root: '/csiplug-a/state/volumes/v1',
      mountPoint: '/tmp/csiplug-a/target one',
      fsType: 'tmpfs',
      source: 'tmpfs',
    });
    expect(topMountAt(mounts, '/tmp/csiplug-a/target one')?.id).toBe(43);
    expect(backingOf(mounts, '/var/lib/x')).toEqual({ device: '8:1', root: '/var/lib/x' });
  });

  it('lists mounts under a directory newest first: the order to unmount them in', () => {
    expect(mountsUnder(mounts, '/tmp/csiplug-a')).toEqual([
      '/tmp/csiplug-a/target one',
      '/tmp/csiplug-a/target one',
      '/tmp/csiplug-a/staging/v1',
    ]);
  });
});
