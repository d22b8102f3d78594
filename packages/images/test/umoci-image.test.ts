// A real OCI image made by Debian's umoci (three layers: files, owners, a
// setuid binary, a symlink; then deletions umoci writes as whiteouts; then a
// user database and an image config) unpacked by our store in both modes:
// the task root must show exactly the tree `umoci unpack` makes of the same
// image, and the image config must give the process Docker would run.
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { ImageRuntimeConfig, LayerBlob, LayerStoreMode } from '../src';
import { LayerStore, prepareRootfs, readImageUserFiles, resolveImageProcess } from '../src';
import { unmountAndRemove } from './support/cleanup';
import { snapshotTree } from './support/layers';

const UMOCI = '/usr/bin/umoci';

let work: string;
let layout: string;

function umoci(...args: string[]): void {
  execFileSync(UMOCI, args, { cwd: work, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Unpacks the image into a fresh bundle, lets `change` edit its rootfs, and repacks it as a new layer. */
function addLayer(change: (rootfs: string) => void): void {
  const bundle = path.join(work, 'bundle');
  rmSync(bundle, { recursive: true, force: true });
  umoci('unpack', '--image', `${layout}:t`, bundle);
  change(path.join(bundle, 'rootfs'));
  umoci('repack', '--image', `${layout}:t`, bundle);
}

function readBlob(digest: string): Buffer {
  return readFileSync(path.join(layout, 'blobs', 'sha256', digest.slice('sha256:'.length)));
}

beforeAll(() => {
  work = mkdtempSync(path.join(tmpdir(), 'umoci-image-'));
  layout = path.join(work, 'img');
  umoci('init', '--layout', layout);
  umoci('new', '--image', `${layout}:t`);
  addLayer((root) => {
    mkdirSync(path.join(root, 'etc'));
    mkdirSync(path.join(root, 'opt/sub'), { recursive: true });
    mkdirSync(path.join(root, 'usr/bin'), { recursive: true });
    writeFileSync(path.join(root, 'etc/a'), 'a');
    writeFileSync(path.join(root, 'opt/sub/b'), 'b');
    writeFileSync(path.join(root, 'usr/bin/tool'), '#!/bin/sh\n');
    chownSync(path.join(root, 'usr/bin/tool'), 12, 34);
    chmodSync(path.join(root, 'usr/bin/tool'), 0o4750);
    symlinkSync('/usr/bin', path.join(root, 'bin'));
  });
  addLayer((root) => {
    rmSync(path.join(root, 'etc/a'));
    rmSync(path.join(root, 'opt/sub'), { recursive: true });
    writeFileSync(path.join(root, 'etc/c'), 'c');
  });
  addLayer((root) => {
    writeFileSync(path.join(root, 'etc/passwd'), 'root:x:0:0::/root:/bin/sh\nsvc:x:12:34::/srv:/bin/sh\n');
    writeFileSync(path.join(root, 'etc/group'), 'root:x:0:\nsvc:x:34:\nextra:x:99:svc\n');
  });
  umoci(
    'config',
    '--image',
    `${layout}:t`,
    '--config.entrypoint',
    '/usr/bin/tool',
    '--config.cmd',
    '--serve',
    '--config.user',
    'svc',
    '--config.workingdir',
    '/srv',
    '--config.env',
    'A=1',
  );
  rmSync(path.join(work, 'bundle'), { recursive: true, force: true });
  umoci('unpack', '--image', `${layout}:t`, path.join(work, 'bundle'));
});
afterAll(() => unmountAndRemove(work));

/** The image's layers and config, read from the OCI layout as the puller will hand them over. */
function readImage(): { layers: LayerBlob[]; config: ImageRuntimeConfig } {
  const index = JSON.parse(readFileSync(path.join(layout, 'index.json'), 'utf8')) as { manifests: { digest: string }[] };
  const manifest = JSON.parse(readBlob(index.manifests[0]!.digest).toString()) as {
    config: { digest: string };
    layers: { digest: string; mediaType: string }[];
  };
  const config = JSON.parse(readBlob(manifest.config.digest).toString()) as { rootfs: { diff_ids: string[] }; config: ImageRuntimeConfig };
  const layers = manifest.layers.map((l, i) => ({
    blobPath: path.join(layout, 'blobs', 'sha256', l.digest.slice('sha256:'.length)),
    mediaType: l.mediaType,
    diffId: config.rootfs.diff_ids[i]!,
  }));
  return { layers, config: config.config };
}

describe.each<LayerStoreMode>(['overlay', 'copy'])('an umoci-built image, %s mode', (mode) => {
  const taskDir = () => path.join(work, `task-${mode}`);
  afterEach(() => unmountAndRemove(taskDir()));

  it('unpacks to the tree umoci unpack makes, and gives the process Docker would run', async () => {
    const { layers, config } = readImage();
    expect(layers).toHaveLength(3);
    const store = await LayerStore.open({ storeDir: path.join(work, `store-${mode}`), mode });
    const image = await store.unpackImage(layers);
    const { rootfs } = await prepareRootfs({ image, dir: taskDir() });
    const ours = snapshotTree(rootfs);
    expect(ours).toEqual(snapshotTree(path.join(work, 'bundle', 'rootfs')));
    expect(ours.map((l) => l.split(' ')[0])).not.toContain('etc/a');
    expect(ours.find((l) => l.startsWith('usr/bin/tool '))).toMatch(/^usr\/bin\/tool 4750 12:34 file/);

    const proc = resolveImageProcess(config, { args: ['--port', '9'] }, await readImageUserFiles(rootfs));
    expect(proc.argv).toEqual(['/usr/bin/tool', '--port', '9']);
    expect(proc.cwd).toBe('/srv');
    expect(proc.user).toMatchObject({ uid: 12, gid: 34, additionalGids: [99], home: '/srv' });
    expect(proc.env).toContain('A=1');
  });
});
