// The hostpath plugin's fault switches on the real process and socket, as
// the agent's fault suite uses them: a plugin that never creates its socket,
// one whose socket is not gRPC, one that crashes at start, garbage answers,
// a crash on a named RPC, answers slower than the caller's deadline, faults
// turned on and off through the fault file, and controller publish.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CSIError, type GrpcCSIClient, mountCapability } from '@csiplug/csi';
import { Harness } from './harness';

jest.setTimeout(60_000);

const RW = mountCapability('SINGLE_NODE_WRITER');

async function failure(p: Promise<unknown>): Promise<CSIError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  if (!(e instanceof CSIError)) throw new Error(`expected a CSIError, got ${String(e)}`);
  return e;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('hostpath plugin fault switches (real process)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  async function volume(client: GrpcCSIClient): Promise<string> {
    return (await client.createVolume({ name: `v-${Date.now()}`, volumeCapabilities: [RW] })).volume!.volumeId;
  }

  it('--start-fault no-socket: stays up, never listens; SIGTERM still ends it cleanly', async () => {
    const p = h.spawn(['--start-fault', 'no-socket']);
    for (let i = 0; i < 500 && !p.stderr().includes('without creating the socket'); i++) await sleep(20);
    await sleep(300);
    expect(p.proc.exitCode).toBeNull();
    expect(fs.existsSync(h.sock)).toBe(false);
    const e = await failure(h.client().probe({ retry: { maxAttempts: 1 } }));
    expect(e.codeName).toBe('UNAVAILABLE');
    p.proc.kill('SIGTERM');
    expect(await p.exited).toEqual({ code: 0, signal: null });
  });

  it('--start-fault not-grpc: a socket that answers, but not with gRPC; the client fails at once, the plugin stays up', async () => {
    const p = h.spawn(['--start-fault', 'not-grpc']);
    const client = h.client({ probe: 2_000 });
    for (let i = 0; i < 750 && !fs.existsSync(h.sock); i++) await sleep(20);
    expect(fs.statSync(h.sock).isSocket()).toBe(true);
    const e = await failure(client.probe({ retry: { maxAttempts: 1 } }));
    // Refused by the protocol, not left to the 2 s deadline (that would be DEADLINE_EXCEEDED).
    expect(e.codeName).toBe('UNAVAILABLE');
    expect(e.message).toMatch(/Protocol error/);
    expect(p.proc.exitCode).toBeNull();
    p.proc.kill('SIGTERM');
    expect(await p.exited).toEqual({ code: 0, signal: null });
    expect(fs.existsSync(h.sock)).toBe(false);
  });

  it('--start-fault crash: dies by SIGKILL before listening', async () => {
    const p = h.spawn(['--start-fault', 'crash']);
    expect(await p.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(fs.existsSync(h.sock)).toBe(false);
    expect(p.stderr()).toContain('crashing on purpose (fault switch)');
  });

  it('--garbage-rpc: that RPC gets a response nobody can decode; every other call (a whole mount) works through the proxy', async () => {
    h.spawn(['--garbage-rpc', 'NodeGetInfo']);
    const client = h.client({ retry: { maxAttempts: 1 } });
    await h.waitReady(client);
    const e = await failure(client.nodeGetInfo());
    expect(e.method).toBe('NodeGetInfo');
    expect(['INTERNAL', 'UNKNOWN']).toContain(e.codeName);
    expect(await client.getPluginInfo()).toMatchObject({ name: 'hostpath.csiplug.io' });
    const volumeId = await volume(client);
    const staging = h.path('staging');
    const target = h.path('target');
    fs.mkdirSync(staging);
    await client.nodeStageVolume({ volumeId, stagingTargetPath: staging, volumeCapability: RW });
    await client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: target, volumeCapability: RW, readonly: false });
    expect(h.mountsHere().sort()).toEqual([staging, target].sort());
    await client.nodeUnpublishVolume({ volumeId, targetPath: target });
    await client.nodeUnstageVolume({ volumeId, stagingTargetPath: staging });
    expect(h.mountsHere()).toEqual([]);
  });

  it('--crash-on-rpc: dies by SIGKILL when that RPC is called, leaving what it did before (a staging mount) and its socket', async () => {
    const p = h.spawn(['--crash-on-rpc', 'NodePublishVolume']);
    const client = h.client({ retry: { maxAttempts: 1 } });
    await h.waitReady(client);
    const volumeId = await volume(client);
    const staging = h.path('staging');
    fs.mkdirSync(staging);
    await client.nodeStageVolume({ volumeId, stagingTargetPath: staging, volumeCapability: RW });
    const e = await failure(
      client.nodePublishVolume({
        volumeId,
        stagingTargetPath: staging,
        targetPath: h.path('target'),
        volumeCapability: RW,
        readonly: false,
      }),
    );
    expect(e.codeName).toBe('UNAVAILABLE');
    expect((await p.exited).signal).toBe('SIGKILL');
    expect(h.mountsHere()).toEqual([staging]);
    expect(fs.existsSync(h.sock)).toBe(true);
  });

  it('--slow-rpc: answers after the caller gave up, and the work is done anyway', async () => {
    h.spawn(['--slow-rpc', 'CreateVolume', '--slow-ms', '800']);
    const client = h.client({ csiCall: 300, retry: { maxAttempts: 1 } });
    await h.waitReady(client);
    const e = await failure(client.createVolume({ name: 'late', volumeCapabilities: [RW] }));
    expect(e.codeName).toBe('DEADLINE_EXCEEDED');
    // The late answer still comes (the plugin did the work); a busy machine may take longer than the 800 ms.
    let count = 0;
    for (let i = 0; i < 100 && count === 0; i++) {
      await sleep(100);
      count = (await client.listVolumes({})).entries.length;
    }
    expect(count).toBe(1);
  });

  it('--fault-file: faults turn on, change and turn off in the running plugin', async () => {
    const file = h.path('faults.json');
    h.spawn(['--fault-file', file]);
    const client = h.client({ csiCall: 300, retry: { maxAttempts: 1 } });
    await h.waitReady(client);
    expect(await client.nodeGetInfo()).toMatchObject({ nodeId: 'node-1' });
    fs.writeFileSync(file, JSON.stringify({ hangRpcs: ['NodeGetInfo'] }));
    expect((await failure(client.nodeGetInfo())).codeName).toBe('DEADLINE_EXCEEDED');
    fs.writeFileSync(file, JSON.stringify({ garbageRpcs: ['NodeGetInfo', 'GetPluginInfo'] }));
    expect(['INTERNAL', 'UNKNOWN']).toContain((await failure(client.nodeGetInfo())).codeName);
    expect(['INTERNAL', 'UNKNOWN']).toContain((await failure(client.getPluginInfo())).codeName);
    fs.rmSync(file);
    expect(await client.nodeGetInfo()).toMatchObject({ nodeId: 'node-1' });
  });

  it('--fault-file startFault: read at start, so the next start of the plugin has it', async () => {
    const file = h.path('faults.json');
    fs.writeFileSync(file, JSON.stringify({ startFault: 'crash' }));
    expect((await h.spawn(['--fault-file', file]).exited).signal).toBe('SIGKILL');
    fs.rmSync(file);
    h.spawn(['--fault-file', file]);
    await h.waitReady(h.client());
  });

  it('--controller-publish: advertises PUBLISH_UNPUBLISH_VOLUME and records attachments in the state dir', async () => {
    h.spawn(['--controller-publish', 'true']);
    const client = h.client();
    await h.waitReady(client);
    const caps = await client.controllerGetCapabilities();
    expect(caps.capabilities.map((c) => c.rpc?.type)).toContain('PUBLISH_UNPUBLISH_VOLUME');
    const volumeId = await volume(client);
    const published = await client.controllerPublishVolume({ volumeId, nodeId: 'node-1', volumeCapability: RW, readonly: false });
    expect(published.publishContext).toEqual({ 'hostpath.csiplug.io/attached-to': 'node-1' });
    const file = path.join(fs.realpathSync(h.stateDir), 'attachments.json');
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toEqual({ [volumeId]: ['node-1'] });
    await client.controllerUnpublishVolume({ volumeId, nodeId: 'node-1' });
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toEqual({});
  });
});
