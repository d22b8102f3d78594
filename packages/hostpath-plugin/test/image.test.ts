// The plugin's OCI image (image/build-image.ts) with real parts: built with
// umoci, built again to show the same inputs give the same digests,
// unpacked with `umoci unpack` and run on runc with nothing of the host but
// a bind-mounted socket dir — it prints its usage, serves CSI on that
// socket, and runs its own mount, umount and tar (a snapshot, a stage and
// an unstage) — then pushed to a real registry with the build's --push path
// (skopeo) and pulled back with @csiplug/images' ImagePuller. Each test
// deletes its container, unmounts and removes what it made.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { readMountInfoSync } from '@csiplug/core';
import { mountCapability } from '@csiplug/csi';
import { ImagePuller } from '@csiplug/images';
import { TestRegistry } from '@csiplug/images/testing';
import { type BuiltImage, buildHostpathImage, findRepoRoot } from '../image/build-image';
import { pushImage } from '../image/push-image';
import { mountsUnder } from '../src/mountinfo';
import { Harness } from './harness';

jest.setTimeout(180_000);

const UMOCI = '/usr/bin/umoci';
const RUNC = fs.existsSync('/usr/sbin/runc') ? '/usr/sbin/runc' : '/usr/bin/runc';
const VERSION = (JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { version: string }).version;
/** What the plugin needs beyond umoci's default capabilities: mount(8) and umount(8), tar -xp keeping owners and modes. */
const PLUGIN_CAPS = ['CAP_SYS_ADMIN', 'CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_FSETID', 'CAP_KILL'];

let work: string;
let image: BuiltImage;

beforeAll(async () => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-hp-image-'));
  image = await buildHostpathImage({
    out: path.join(work, 'layout'),
    repoRoot: await findRepoRoot(__dirname),
    epochSeconds: 1_700_000_000,
  });
});

afterAll(() => {
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

interface Container {
  readonly id: string;
  readonly bundle: string;
  readonly proc: ChildProcess;
  readonly output: () => string;
  readonly exited: Promise<number | null>;
}
const containers: Container[] = [];

/** Unpacks the image into a new bundle and lets `edit` change runc's config.json. */
function unpack(name: string, edit: (config: OciConfig) => void): string {
  const bundle = path.join(work, `bundle-${name}`);
  execFileSync(UMOCI, ['unpack', '--image', `${image.layoutDir}:${image.tags[0]}`, bundle], { stdio: ['ignore', 'ignore', 'pipe'] });
  const file = path.join(bundle, 'config.json');
  const config = JSON.parse(fs.readFileSync(file, 'utf8')) as OciConfig;
  config.process.terminal = false;
  edit(config);
  fs.writeFileSync(file, JSON.stringify(config));
  return bundle;
}

interface OciConfig {
  process: { terminal: boolean; args: string[]; capabilities: Record<string, string[]> };
  mounts: { destination: string; type: string; source: string; options?: string[] }[];
}

function run(name: string, bundle: string): Container {
  const id = `csiplug-hp-image-${name}-${process.pid}`;
  const proc = spawn(RUNC, ['run', '--bundle', bundle, id], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  proc.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const c = { id, bundle, proc, output: () => output, exited };
  containers.push(c);
  return c;
}

afterEach(async () => {
  for (const c of containers.splice(0)) {
    if (c.proc.exitCode === null && c.proc.signalCode === null) {
      try {
        execFileSync(RUNC, ['kill', c.id, 'KILL'], { stdio: 'ignore' });
      } catch {
        // already stopped
      }
      await c.exited;
    }
    try {
      execFileSync(RUNC, ['delete', '--force', c.id], { stdio: 'ignore' });
    } catch {
      // runc removed it when it exited
    }
    fs.rmSync(c.bundle, { recursive: true, force: true });
  }
  expect(mountsUnder(readMountInfoSync(), work)).toEqual([]);
});

it('is two layers, node with its libraries then the plugin, and the same inputs give the same digests', async () => {
  expect(image.tags).toEqual([VERSION, 'latest']);
  expect(image.entrypoint).toEqual([process.execPath, '/opt/csiplug/node_modules/@csiplug/hostpath-plugin/bin/csiplug-hostpath.js']);
  expect(image.layers).toHaveLength(2);
  // An empty directory is a fine --out (umoci init refuses one that exists: the build makes it anew).
  fs.mkdirSync(path.join(work, 'layout-again'));
  const again = await buildHostpathImage({
    out: path.join(work, 'layout-again'),
    repoRoot: await findRepoRoot(__dirname),
    epochSeconds: 1_700_000_000,
  });
  expect(again.layers.map((l) => l.digest)).toEqual(image.layers.map((l) => l.digest));
  expect(again.manifestDigest).toBe(image.manifestDigest);
  // Another time in the image changes the digests: the times are in the layers, not left to the build's clock.
  const later = await buildHostpathImage({
    out: path.join(work, 'layout-later'),
    repoRoot: await findRepoRoot(__dirname),
    epochSeconds: 1,
  });
  expect(later.layers[0]!.digest).not.toBe(image.layers[0]!.digest);
  fs.rmSync(path.join(work, 'layout-again'), { recursive: true });
  fs.rmSync(path.join(work, 'layout-later'), { recursive: true });
});

it('runs on runc from nothing but the image: prints its usage', async () => {
  const bundle = unpack('help', (config) => config.process.args.push('--help'));
  // Nothing of the host's /usr: the root is the image's, and it holds no shell or other program than those the plugin runs.
  expect(fs.readdirSync(path.join(bundle, 'rootfs', 'usr', 'bin')).sort()).toEqual(['mount', 'node', 'tar', 'umount']);
  const c = run('help', bundle);
  expect(await c.exited).toBe(0);
  expect(c.output()).toContain('usage: csiplug-hostpath --endpoint unix:///PATH');
});

it('serves CSI from the image on a socket in a bind-mounted dir, and its mount, umount and tar work there', async () => {
  const h = new Harness();
  try {
    const bundle = unpack('serve', (config) => {
      config.process.args.push('--endpoint', 'unix:///csi/csi.sock', '--node-id', 'image-node', '--state-dir', '/csi/state');
      for (const set of Object.keys(config.process.capabilities))
        config.process.capabilities[set] = [...new Set([...config.process.capabilities[set]!, ...PLUGIN_CAPS])];
      config.mounts.push({ destination: '/csi', type: 'bind', source: h.dir, options: ['rbind', 'rw'] });
    });
    const c = run('serve', bundle);
    const client = h.client();
    await h.waitReady(client).catch((err: unknown) => {
      throw new Error(`the plugin in the image never answered: ${String(err)}\n${c.output()}`);
    });
    expect(await client.getPluginInfo()).toMatchObject({ name: 'hostpath.csiplug.io', vendorVersion: VERSION });
    expect(await client.nodeGetInfo()).toMatchObject({ nodeId: 'image-node' });
    const RW = mountCapability('SINGLE_NODE_WRITER');
    const volumeId = (await client.createVolume({ name: 'in-image', volumeCapabilities: [RW] })).volume!.volumeId;
    // tar, from the image, archives the volume.
    fs.writeFileSync(path.join(h.stateDir, 'volumes', volumeId, 'hello.txt'), 'from the host\n');
    const snap = await client.createSnapshot({ name: 's1', sourceVolumeId: volumeId });
    expect(snap.snapshot).toMatchObject({ readyToUse: true, sourceVolumeId: volumeId });
    const listing = execFileSync('tar', ['-tf', path.join(h.stateDir, 'snapshots', `${snap.snapshot!.snapshotId}.tar`)], {
      encoding: 'utf8',
    });
    expect(listing).toContain('./hello.txt');
    // mount and umount, from the image, in the container's mount namespace.
    fs.mkdirSync(path.join(h.dir, 'staging'));
    await client.nodeGetCapabilities();
    await client.nodeStageVolume({ volumeId, stagingTargetPath: '/csi/staging', volumeCapability: RW });
    const stats = await client.nodeGetVolumeStats({ volumeId, volumePath: '/csi/staging', stagingTargetPath: '/csi/staging' });
    expect(stats.volumeCondition).toMatchObject({ abnormal: false });
    await client.nodeUnstageVolume({ volumeId, stagingTargetPath: '/csi/staging' });
    execFileSync(RUNC, ['kill', c.id, 'TERM']);
    expect(await c.exited).toBe(0);
    expect(fs.existsSync(h.sock)).toBe(false);
  } finally {
    await h.cleanup();
  }
});

it('goes to a real registry with --push (skopeo) and comes back whole with the ImagePuller', async () => {
  const registry = await TestRegistry.start();
  let puller: ImagePuller | undefined;
  try {
    const repoTag = `csiplug/hostpath-plugin:${VERSION}`;
    await pushImage({
      layoutDir: image.layoutDir,
      tag: image.tags[0]!,
      destination: `${registry.host}/${repoTag}`,
      destCertDir: path.join(registry.certsDir, registry.host),
      destCreds: `${registry.username}:${registry.password}`,
    });
    puller = await ImagePuller.open({ storeDir: path.join(work, 'store'), certsDir: registry.certsDir });
    const pulled = await puller.pull(`${registry.host}/${repoTag}`, { auth: { username: registry.username, password: registry.password } });
    expect(pulled.manifestDigest).toBe(image.manifestDigest);
    expect(pulled.layers.map((l) => ({ digest: l.digest, size: l.size }))).toEqual(
      image.layers.map((l) => ({ digest: l.digest, size: l.size })),
    );
    expect(pulled.config.entrypoint).toEqual(image.entrypoint);
    expect(pulled.config.labels).toMatchObject({ 'org.opencontainers.image.version': VERSION });
    process.stdout.write(
      `hostpath plugin image ${pulled.manifestDigest} round-tripped: ${pulled.layers.map((l, i) => `layer ${i + 1} ${l.size} bytes`).join(', ')}\n`,
    );
  } finally {
    puller?.dispose();
    await registry.stop();
  }
});
