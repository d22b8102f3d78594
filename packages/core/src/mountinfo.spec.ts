// The mountinfo parser and its queries, on sample texts (the kernel's format,
// escapes and optional fields) and on this process's real table.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { backingOf, mountPointsUnder, parseMountInfo, readMountInfo, readMountInfoSync, topMountAt, unescapeMountPath } from './mountinfo';

const SAMPLE = [
  '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
  '40 22 0:35 / /tmp rw,nosuid,nodev shared:20 - tmpfs tmpfs rw',
  '41 40 0:35 /csiplug-a/state/volumes/v1 /tmp/csiplug-a/staging/v1 rw,relatime shared:20 - tmpfs tmpfs rw',
  '42 40 0:35 /csiplug-a/state/volumes/v1 /tmp/csiplug-a/target\\040one ro,relatime shared:20 - tmpfs tmpfs rw',
  '43 42 0:35 /other /tmp/csiplug-a/target\\040one rw shared:20 - tmpfs tmpfs rw',
].join('\n');

describe('parseMountInfo', () => {
  const mounts = parseMountInfo(SAMPLE);

  it('parses every field and unescapes paths', () => {
    expect(mounts).toHaveLength(5);
    expect(mounts[3]).toEqual({
      id: 42,
      parentId: 40,
      device: '0:35',
      root: '/csiplug-a/state/volumes/v1',
      mountPoint: '/tmp/csiplug-a/target one',
      options: ['ro', 'relatime'],
      optionalFields: ['shared:20'],
      fsType: 'tmpfs',
      source: 'tmpfs',
      superOptions: ['rw'],
    });
  });

  it('decodes octal escapes in mount points and roots', () => {
    const text = [
      '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw',
      '80 22 8:1 /data/v /var/lib/csi\\040dir/x rw,relatime shared:1 - ext4 /dev/sda1 rw',
      '',
    ].join('\n');
    expect(parseMountInfo(text).map((m) => m.mountPoint)).toEqual(['/', '/var/lib/csi dir/x']);
    expect(unescapeMountPath('/a\\011b\\134c\\012d')).toBe('/a\tb\\c\nd');
  });

  it('reads any number of optional fields, none included', () => {
    const [none, two] = parseMountInfo(['30 1 0:5 / /a rw - proc proc rw', '31 1 0:5 / /b rw shared:3 master:1 - proc proc rw'].join('\n'));
    expect(none).toMatchObject({ mountPoint: '/a', optionalFields: [], fsType: 'proc' });
    expect(two).toMatchObject({ mountPoint: '/b', optionalFields: ['shared:3', 'master:1'], fsType: 'proc' });
  });

  it('skips blank and truncated lines rather than invent a mount', () => {
    expect(
      parseMountInfo(['', '   ', '22 1 8:1 / /', '23 1 8:1 / /x rw shared:1 -', '24 1 8:1 / /y rw - ext4 /dev/sda1 rw'].join('\n')).map(
        (m) => m.mountPoint,
      ),
    ).toEqual(['/y']);
  });
});

describe('mountinfo queries', () => {
  const mounts = parseMountInfo(SAMPLE);

  it('finds the mount on top of a path', () => {
    expect(topMountAt(mounts, '/tmp/csiplug-a/target one')?.id).toBe(43);
    expect(topMountAt(mounts, '/tmp/csiplug-a/none')).toBeUndefined();
  });

  it('computes what a bind mount of a directory looks like', () => {
    expect(backingOf(mounts, '/tmp/csiplug-a/state/volumes/v1')).toEqual({ device: '0:35', root: '/csiplug-a/state/volumes/v1' });
    expect(backingOf(mounts, '/var/lib/x')).toEqual({ device: '8:1', root: '/var/lib/x' });
    expect(backingOf([], '/var/lib/x')).toBeUndefined();
  });

  it('lists the mount points at or below a directory in mount order, not its siblings', () => {
    expect(mountPointsUnder(mounts, '/tmp/csiplug-a')).toEqual([
      '/tmp/csiplug-a/staging/v1',
      '/tmp/csiplug-a/target one',
      '/tmp/csiplug-a/target one',
    ]);
    expect(mountPointsUnder(mounts, '/tmp/csiplug-a/')).toEqual(mountPointsUnder(mounts, '/tmp/csiplug-a'));
    expect(mountPointsUnder(mounts, '/tmp/csiplug')).toEqual([]);
    expect(mountPointsUnder(mounts, '/')).toHaveLength(5);
  });
});

describe('reading the real table', () => {
  it('lists / and agrees between the sync and async readers', async () => {
    const sync = readMountInfoSync();
    expect(topMountAt(sync, '/')).toBeDefined();
    expect((await readMountInfo()).map((m) => m.id)).toContain(topMountAt(sync, '/')!.id);
  });

  it('reads another file when told to', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-mountinfo-'));
    try {
      const file = path.join(dir, 'mountinfo');
      fs.writeFileSync(file, SAMPLE);
      expect((await readMountInfo(file)).map((m) => m.id)).toEqual([22, 40, 41, 42, 43]);
      expect(readMountInfoSync(file)).toHaveLength(5);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
