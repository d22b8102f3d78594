// The two single-node writer modes of CSI v1.9.0 against the real plugin
// process over its socket, with real bind mounts: the plugin reports the
// SINGLE_NODE_MULTI_WRITER capability (node and controller), confirms both
// modes, publishes a SINGLE_NODE_MULTI_WRITER volume read-write at many
// targets, and refuses a second read-write target of a
// SINGLE_NODE_SINGLE_WRITER volume with FAILED_PRECONDITION (readers beside
// its one writer are published), also when the new target resolves to the
// writer's own published path.
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  CSIError,
  type GrpcCSIClient,
  checkConfirmedCapabilities,
  controllerCapabilitiesFrom,
  mountCapability,
  nodeCapabilitiesFrom,
} from '@csiplug/csi';
import { Harness } from './harness';

jest.setTimeout(60_000);

const SINGLE = mountCapability('SINGLE_NODE_SINGLE_WRITER');
const MULTI = mountCapability('SINGLE_NODE_MULTI_WRITER');

async function failure(p: Promise<unknown>): Promise<CSIError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof CSIError)) throw new Error(`expected a CSIError, got ${String(e)}`);
  return e;
}

describe('hostpath plugin: single-node-single-writer and single-node-multi-writer', () => {
  let h: Harness;
  let client: GrpcCSIClient;

  beforeEach(async () => {
    h = new Harness();
    h.spawn();
    client = h.client();
    await h.waitReady(client);
  });
  afterEach(async () => {
    await h.cleanup();
  });

  async function staged(name: string, cap: typeof SINGLE): Promise<{ volumeId: string; staging: string }> {
    const { volume } = await client.createVolume({ name, volumeCapabilities: [cap] });
    const volumeId = volume!.volumeId;
    const staging = h.path('staging', name);
    fs.mkdirSync(staging, { recursive: true });
    await client.nodeStageVolume({ volumeId, stagingTargetPath: staging, volumeCapability: cap });
    return { volumeId, staging };
  }

  it('reports the SINGLE_NODE_MULTI_WRITER capability and confirms both modes', async () => {
    expect(nodeCapabilitiesFrom(await client.nodeGetCapabilities()).singleNodeMultiWriter).toBe(true);
    expect(controllerCapabilitiesFrom(await client.controllerGetCapabilities()).singleNodeMultiWriter).toBe(true);
    const { volume } = await client.createVolume({ name: 'v', volumeCapabilities: [SINGLE, MULTI] });
    const want = [SINGLE, MULTI];
    const ok = await client.validateVolumeCapabilities({ volumeId: volume!.volumeId, volumeCapabilities: want });
    expect(checkConfirmedCapabilities(want, ok)).toEqual({ ok: true });
  });

  it('single-node-multi-writer: read-write at two targets at once, both writing the one volume', async () => {
    const { volumeId, staging } = await staged('multi', MULTI);
    const t1 = h.path('pods', 'a1', 'multi');
    const t2 = h.path('pods', 'a2', 'multi');
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: t1, volumeCapability: MULTI });
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: t2, volumeCapability: MULTI });
    fs.writeFileSync(path.join(t1, 'from-a1'), '1');
    fs.writeFileSync(path.join(t2, 'from-a2'), '2');
    expect(fs.readdirSync(t1).sort()).toEqual(['from-a1', 'from-a2']);
    await client.nodeUnpublishVolume({ volumeId, targetPath: t1 });
    await client.nodeUnpublishVolume({ volumeId, targetPath: t2 });
    await client.nodeUnstageVolume({ volumeId, stagingTargetPath: staging });
    expect(h.mountsHere()).toEqual([]);
  });

  it('single-node-single-writer: a second read-write target is FAILED_PRECONDITION naming the first; readers join; the next writer once it is gone', async () => {
    const { volumeId, staging } = await staged('single', SINGLE);
    const t1 = h.path('pods', 'a1', 'single');
    const t2 = h.path('pods', 'a2', 'single');
    const reader = h.path('pods', 'a3', 'single');
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: t1, volumeCapability: SINGLE });
    // The same target again is idempotent.
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: t1, volumeCapability: SINGLE });
    const refused = await failure(
      client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: t2, volumeCapability: SINGLE }),
    );
    expect(refused.codeName).toBe('FAILED_PRECONDITION');
    expect(refused.message).toContain(`is SINGLE_NODE_SINGLE_WRITER and already published read-write at ${t1}; unpublish it there first`);
    expect(fs.existsSync(t2)).toBe(false);
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: reader, volumeCapability: SINGLE, readonly: true });
    expect(() => fs.writeFileSync(path.join(reader, 'x'), 'x')).toThrow(/EROFS|read-only/);
    await client.nodeUnpublishVolume({ volumeId, targetPath: t1 });
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: t2, volumeCapability: SINGLE });
    fs.writeFileSync(path.join(t2, 'from-a2'), '2');
    await client.nodeUnpublishVolume({ volumeId, targetPath: t2 });
    await client.nodeUnpublishVolume({ volumeId, targetPath: reader });
    await client.nodeUnstageVolume({ volumeId, stagingTargetPath: staging });
    expect(h.mountsHere()).toEqual([]);
  });

  it("single-node-single-writer: a new target that resolves to the writer's published path (a symlink) is a second writer, not a retry", async () => {
    const { volumeId, staging } = await staged('linked', SINGLE);
    const t1 = h.path('pods', 'a1', 'linked');
    const link = h.path('pods', 'a2', 'linked');
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: t1, volumeCapability: SINGLE });
    fs.mkdirSync(path.dirname(link), { recursive: true });
    fs.symlinkSync(t1, link);
    const refused = await failure(
      client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: link, volumeCapability: SINGLE }),
    );
    expect(refused.codeName).toBe('FAILED_PRECONDITION');
    expect(refused.message).toContain(`is SINGLE_NODE_SINGLE_WRITER and already published read-write at ${t1}; unpublish it there first`);
    // The writer's own target again stays idempotent, written with a trailing separator too.
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: t1, volumeCapability: SINGLE });
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: `${t1}/`, volumeCapability: SINGLE });
    fs.unlinkSync(link);
    await client.nodeUnpublishVolume({ volumeId, targetPath: t1 });
    await client.nodeUnstageVolume({ volumeId, stagingTargetPath: staging });
    expect(h.mountsHere()).toEqual([]);
  });
});
