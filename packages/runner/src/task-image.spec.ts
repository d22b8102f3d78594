import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ImageNotFoundError, type PrepareTaskImageRequest, type PreparedTaskImage, type TaskImagesService } from '@csiplug/images';
import type { IsolationConfig } from '@csiplug/driver';
import { DEFAULT_IMAGE_DRIVER, type TaskSpec } from '@csiplug/jobspec';
import { imageMountsOf } from './image-policy';
import { TaskImageSetupError, imageDirOf, prepareImageStart } from './task-image';

/** An image service over a root made by hand: what prepare was asked, and the events it sends. */
class FakeImages implements TaskImagesService {
  readonly asked: PrepareTaskImageRequest[] = [];
  failWith: Error | undefined;
  constructor(
    readonly rootfs: string,
    readonly config: PreparedTaskImage['config'],
  ) {}
  async prepare(request: PrepareTaskImageRequest): Promise<PreparedTaskImage> {
    this.asked.push(request);
    for (const n of [1, 1, 2])
      request.onEvent?.({
        kind: 'downloading',
        reference: 'r/app:1',
        downloadedBytes: n,
        totalBytes: 2,
        message: `Downloading image r/app:1: ${n} of 2 MB`,
      });
    if (this.failWith) throw this.failWith;
    request.onEvent?.({
      kind: 'pulled',
      reference: 'r/app:1',
      digest: 'sha256:abc',
      fromStore: false,
      message: 'Pulled image r/app:1, digest sha256:abc',
    });
    return { rootfs: this.rootfs, config: this.config, digest: 'sha256:abc', reference: 'r/app:1', reused: false };
  }
  async release(): Promise<void> {}
  async adopt(): Promise<void> {}
}

describe('prepareImageStart', () => {
  let dir: string;
  let rootfs: string;
  let taskDir: string;
  const said: { type: string; message: string; failed?: boolean }[] = [];
  const config = {
    entrypoint: ['/bin/app'],
    cmd: ['--help'],
    env: ['LEVEL=info', 'PATH=/image/bin'],
    workingDir: '/srv',
    user: 'app',
    labels: {},
    diffIds: [],
  };
  const task = (extra: Partial<TaskSpec> = {}): TaskSpec =>
    ({
      name: 'main',
      driver: 'docker',
      isolated: true,
      image: { ref: 'r/app:1', forcePull: false, pullTimeout: 1_000, mounts: [], auth: { username: 'u', password: 'p' } },
      config: { command: '', args: [] },
      env: {},
      volumeMounts: [],
      ...extra,
    }) as TaskSpec;
  const start = (
    t: TaskSpec,
    images: TaskImagesService,
    extra: { command?: string; args?: string[]; env?: Record<string, string>; mounts?: IsolationConfig['mounts'] } = {},
  ) =>
    prepareImageStart({
      task: t,
      taskDir,
      images,
      command: extra.command ?? '',
      args: extra.args ?? [],
      env: extra.env ?? {},
      isolation: {
        chroot: {},
        localDir: path.join(taskDir, 'local'),
        allocDir: path.join(dir, 'alloc'),
        secretsDir: path.join(taskDir, 'secrets'),
        ...(extra.mounts ? { mounts: extra.mounts } : {}),
      },
      say: (e) => said.push(e),
    });

  beforeEach(() => {
    said.length = 0;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-task-image-'));
    rootfs = path.join(dir, 'rootfs');
    taskDir = path.join(dir, 'task');
    fs.mkdirSync(path.join(rootfs, 'etc'), { recursive: true });
    fs.writeFileSync(path.join(rootfs, 'etc/passwd'), 'root:x:0:0::/root:/bin/sh\napp:x:1234:1235::/home/app:/bin/sh\n');
    fs.writeFileSync(path.join(rootfs, 'etc/group'), 'app:x:1235:\nextra:x:77:app\n');
    for (const d of ['local', 'secrets']) fs.mkdirSync(path.join(taskDir, d), { recursive: true, mode: 0o700 });
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it("runs the image's process as the image's user, with the task's env first, in the image's working dir, and gives it its dirs", async () => {
    const images = new FakeImages(rootfs, config);
    const s = await start(task(), images, { args: ['--nodeid', 'n1'], env: { LEVEL: 'debug' } });
    expect(images.asked[0]).toMatchObject({
      taskDir: imageDirOf(taskDir),
      ref: 'r/app:1',
      auth: { username: 'u', password: 'p' },
      allowDevices: false,
    });
    // args alone replace the image's Cmd under its Entrypoint.
    expect([s.command, ...s.args]).toEqual(['/bin/app', '--nodeid', 'n1']);
    expect(s.env).toMatchObject({ LEVEL: 'debug', PATH: '/image/bin', HOME: '/home/app' });
    expect(s.isolation.image).toEqual({ rootfs, cwd: '/srv' });
    expect(s.isolation.user).toEqual({ uid: 1234, gid: 1235, additionalGids: [77] });
    expect(fs.statSync(path.join(taskDir, 'local')).uid).toBe(1234);
    // The puller's figures, each once; then Pulled with its digest.
    expect(said.map((e) => e.type)).toEqual(['Downloading Image', 'Downloading Image', 'Pulled']);
    expect(said.at(-1)!.message).toBe('Pulled image r/app:1, digest sha256:abc');
  });

  it('says an archive\'s load as "Loading Image" (with its path) and "Loaded" (with its digest), never as a pull', async () => {
    const archive = '/srv/images/app.tar';
    const ref = `oci-archive:${archive}:v1`;
    const images: TaskImagesService = {
      prepare: async (request) => {
        request.onEvent?.({ kind: 'loading', reference: ref, path: archive, message: `Loading image from ${archive}` });
        request.onEvent?.({
          kind: 'loaded',
          reference: ref,
          digest: 'sha256:abc',
          fromStore: false,
          message: `Loaded image ${ref}, digest sha256:abc`,
        });
        return { rootfs, config, digest: 'sha256:abc', reference: ref, reused: false };
      },
      release: async () => undefined,
      adopt: async () => undefined,
    };
    await start(task({ image: { ref, forcePull: false, pullTimeout: 1_000, mounts: [] } } as Partial<TaskSpec>), images);
    expect(said).toEqual([
      { type: 'Loading Image', message: `Loading image from ${archive}`, details: { image: ref, path: archive } },
      { type: 'Loaded', message: `Loaded image ${ref}, digest sha256:abc`, details: { image: ref, digest: 'sha256:abc' } },
    ]);
  });

  it("takes the task's user over the image's, a csi_plugin task as root, and the task's entrypoint and work_dir", async () => {
    const images = new FakeImages(rootfs, config);
    expect((await start(task({ user: 'root' }), images)).isolation.user).toEqual({ uid: 0, gid: 0 });
    expect((await start(task({ csiPlugin: { id: 'p' } } as Partial<TaskSpec>), images)).isolation.user).toEqual({ uid: 0, gid: 0 });
    const t = task();
    t.image = { ...t.image!, entrypoint: ['/bin/other'], workDir: '/work' };
    const s = await start(t, images, { command: '/bin/x', args: ['a'] });
    // A task entrypoint drops the image's Cmd; command + args become the Cmd.
    expect([s.command, ...s.args]).toEqual(['/bin/other', '/bin/x', 'a']);
    expect(s.isolation.image!.cwd).toBe('/work');
  });

  it("fails as a Setup Failure with the pull's own message, and on a user the image does not define", async () => {
    const images = new FakeImages(rootfs, config);
    images.failWith = new ImageNotFoundError('r', 'r/app:nope');
    await expect(start(task(), images)).rejects.toBeInstanceOf(TaskImageSetupError);
    expect(said.at(-1)).toEqual({ type: 'Setup Failure', message: images.failWith.message, failed: true });
    images.failWith = undefined;
    await expect(start(task({ user: 'nobody-here' }), images)).rejects.toThrow(/image r\/app:1: .*nobody-here/);
    expect(said.at(-1)!.type).toBe('Setup Failure');
    await expect(start(task(), new FakeImages(rootfs, { ...config, entrypoint: undefined, cmd: undefined }))).rejects.toThrow(
      /image r\/app:1: no command to run: the image has no Entrypoint or Cmd/,
    );
  });

  it('checks each bind at every start: a source rendered since setup binds, one the task swapped for a link fails the start', async () => {
    const images = new FakeImages(rootfs, config);
    const binds = imageMountsOf(
      [{ type: 'bind', source: 'local/data', target: '/data', readOnly: false }],
      { taskDir, sharedDir: path.join(dir, 'alloc') },
      DEFAULT_IMAGE_DRIVER,
    );
    expect(binds.refusal).toBeUndefined();
    // Not there yet (a template renders it before the start): a Setup Failure naming the mount, so the restart policy applies.
    await expect(start(task(), images, { mounts: binds.mounts })).rejects.toThrow(
      /the bind mount of local\/data at \/data: its source .*local\/data does not exist/,
    );
    expect(said.at(-1)).toMatchObject({ type: 'Setup Failure', failed: true });
    fs.mkdirSync(path.join(taskDir, 'local/data'));
    const s = await start(task(), images, { mounts: binds.mounts });
    expect(s.isolation.mounts).toEqual([{ source: path.join(taskDir, 'local/data'), destination: '/data', readOnly: false }]);
    // Between starts the task (it owns local/) makes local/data a link to the host's root: the next start refuses it.
    fs.rmdirSync(path.join(taskDir, 'local/data'));
    fs.symlinkSync('/', path.join(taskDir, 'local/data'));
    await expect(start(task(), images, { mounts: binds.mounts })).rejects.toThrow(/local\/data is a symbolic link/);
    expect(said.at(-1)).toMatchObject({ type: 'Setup Failure', failed: true });
  });
});
