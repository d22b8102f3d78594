// The client against misbehaving fake plugins over real unix sockets:
// not listening, closing the socket, hanging past the deadline, answering
// UNIMPLEMENTED or garbage, flaky codes (retry attempts counted on the
// server side), and the server helpers' stale-socket handling.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { AbortError, DefaultTimeoutPolicy, RealClock, SeededRandom } from '@csiplug/core';
import {
  CSIError,
  type CsiServer,
  type CsiServerHandlers,
  EndpointInUseError,
  GrpcCSIClient,
  csiStatus,
  isRetryable,
  serveCsi,
} from '../src';

const identity: CsiServerHandlers['identity'] = {
  GetPluginInfo: () => ({ name: 'fake.csiplug.io', vendorVersion: '0.0.1' }),
  Probe: () => ({}),
};

describe('CSIClient over a unix socket', () => {
  let dir: string;
  let sock: string;
  const servers: Array<{ dispose(): unknown }> = [];
  const clients: GrpcCSIClient[] = [];

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-csi-'));
    sock = path.join(dir, 'csi.sock');
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) c.dispose();
    for (const s of servers.splice(0)) await s.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  function client(opts: { probe?: number; csiCall?: number; retry?: object } = {}): GrpcCSIClient {
    const c = new GrpcCSIClient(
      `unix://${sock}`,
      {
        timeouts: new DefaultTimeoutPolicy({ probe: opts.probe ?? 2_000, csiCall: opts.csiCall ?? 2_000 }),
        clock: new RealClock(),
        random: new SeededRandom(1),
      },
      { retry: { baseDelayMs: 5, maxDelayMs: 20, ...opts.retry } },
    );
    clients.push(c);
    return c;
  }

  async function serve(handlers: CsiServerHandlers, options = {}): Promise<CsiServer> {
    const s = await serveCsi(`unix://${sock}`, handlers, { shutdownGraceMs: 200, ...options });
    servers.push(s);
    return s;
  }

  it('makes typed calls and reports absent ready as ready', async () => {
    await serve({ identity, node: { NodeGetInfo: () => ({ nodeId: 'n1', maxVolumesPerNode: '3' }) } });
    const c = client();
    await expect(c.getPluginInfo()).resolves.toMatchObject({ name: 'fake.csiplug.io', vendorVersion: '0.0.1', manifest: {} });
    await expect(c.probe()).resolves.toEqual({ ready: true });
    await expect(c.nodeGetInfo()).resolves.toEqual({ nodeId: 'n1', maxVolumesPerNode: '3', accessibleTopology: null });
  });

  it('reports a plugin that is not listening as UNAVAILABLE and works once it is', async () => {
    const c = client({ retry: { maxAttempts: 2 } });
    const err = (await c.probe().catch((e: unknown) => e)) as CSIError;
    expect(err).toBeInstanceOf(CSIError);
    expect(err.codeName).toBe('UNAVAILABLE');
    expect(err.attempts).toBe(2);
    expect(err.message).toMatch(/not reachable/);
    await serve({ identity });
    // The channel reconnects on its own (capped backoff); the same client is used.
    await expect(c.probe({ retry: { maxAttempts: 50, baseDelayMs: 20, maxDelayMs: 100 } })).resolves.toEqual({ ready: true });
  });

  it('reports a plugin that closes the socket as UNAVAILABLE and stays usable', async () => {
    const raw = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => raw.listen(sock, r));
    servers.push({ dispose: () => new Promise<void>((r) => raw.close(() => r())) });
    const c = client({ retry: { maxAttempts: 3 } });
    const err = (await c.getPluginInfo().catch((e: unknown) => e)) as CSIError;
    expect(err.codeName).toBe('UNAVAILABLE');
    expect(isRetryable(err)).toBe(true);
    await servers.pop()!.dispose();
    fs.rmSync(sock, { force: true });
    await serve({ identity });
    await expect(c.getPluginInfo({ retry: { maxAttempts: 50, baseDelayMs: 20, maxDelayMs: 100 } })).resolves.toMatchObject({
      name: 'fake.csiplug.io',
    });
  });

  it('gives a hung RPC DEADLINE_EXCEEDED and leaves the client usable', async () => {
    let cancelled = 0;
    await serve({
      identity,
      node: {
        NodeGetInfo: (_req, ctx) =>
          new Promise((_resolve, reject) =>
            ctx.signal.addEventListener('abort', () => {
              cancelled++;
              reject(csiStatus.aborted('caller went away'));
            }),
          ),
      },
    });
    const c = client({ csiCall: 150 });
    const err = (await c.nodeGetInfo().catch((e: unknown) => e)) as CSIError;
    expect(err.codeName).toBe('DEADLINE_EXCEEDED');
    expect(err.attempts).toBe(1);
    expect(err.message).toMatch(/no answer .* within 150 ms/);
    await expect(c.probe()).resolves.toEqual({ ready: true });
    expect(cancelled).toBe(1);
  });

  it('cancels a call in flight when the signal aborts', async () => {
    await serve({
      identity,
      node: {
        NodeGetInfo: (_r, ctx) => new Promise((_res, rej) => ctx.signal.addEventListener('abort', () => rej(csiStatus.aborted('gone')))),
      },
    });
    const c = client({ csiCall: 10_000 });
    const ac = new AbortController();
    const p = c.nodeGetInfo({ signal: ac.signal }).catch((e: unknown) => e);
    await c.probe(); // the hung call is surely on the wire now
    ac.abort();
    expect(await p).toBeInstanceOf(AbortError);
    await expect(c.probe()).resolves.toEqual({ ready: true });
  });

  it('reports UNIMPLEMENTED clearly, without retrying, and stays usable', async () => {
    let calls = 0;
    await serve({ identity }, { beforeCall: () => void calls++ });
    const c = client();
    const err = (await c.nodeGetCapabilities().catch((e: unknown) => e)) as CSIError;
    expect(err.isUnimplemented()).toBe(true);
    expect(err.message).toMatch(/does not implement CSI NodeGetCapabilities/);
    expect(calls).toBe(1);
    await expect(c.probe()).resolves.toEqual({ ready: true });
  });

  it('counts attempts on the server: retryable codes are retried, others are not', async () => {
    const seen: Record<string, number> = {};
    await serve({
      identity,
      node: {
        NodeGetInfo: () => {
          seen.info = (seen.info ?? 0) + 1;
          if (seen.info <= 2) throw csiStatus.unavailable('warming up');
          return { nodeId: 'n1' };
        },
        NodeGetCapabilities: () => {
          seen.caps = (seen.caps ?? 0) + 1;
          if (seen.caps <= 1) throw csiStatus.aborted('operation pending');
          return { capabilities: [] };
        },
        NodeUnstageVolume: () => {
          seen.unstage = (seen.unstage ?? 0) + 1;
          throw csiStatus.notFound('volume "v1" does not exist');
        },
        NodeGetVolumeStats: () => {
          seen.stats = (seen.stats ?? 0) + 1;
          throw csiStatus.resourceExhausted('busy');
        },
      },
    });
    const c = client({ retry: { maxAttempts: 4 } });
    await expect(c.nodeGetInfo()).resolves.toMatchObject({ nodeId: 'n1' });
    expect(seen.info).toBe(3);
    await c.nodeGetCapabilities();
    expect(seen.caps).toBe(2);
    const nf = (await c.nodeUnstageVolume({ volumeId: 'v1', stagingTargetPath: '/s' }).catch((e: unknown) => e)) as CSIError;
    expect(nf.isNotFound()).toBe(true);
    expect(seen.unstage).toBe(1);
    const busy = (await c.nodeGetVolumeStats({ volumeId: 'v1', volumePath: '/p' }).catch((e: unknown) => e)) as CSIError;
    expect(busy.codeName).toBe('RESOURCE_EXHAUSTED');
    expect(busy.attempts).toBe(4);
    expect(seen.stats).toBe(4);
  });

  it('reports a garbage answer as an error and stays usable', async () => {
    const server = new grpc.Server();
    const garbage: grpc.ServiceDefinition = {
      Probe: {
        path: '/csi.v1.Identity/Probe',
        requestStream: false,
        responseStream: false,
        requestSerialize: () => Buffer.alloc(0),
        requestDeserialize: () => ({}),
        // field 1, length-delimited, with a length that runs past the end
        responseSerialize: () => Buffer.from([0x0a, 0xff, 0xff, 0xff]),
        responseDeserialize: (b: Buffer) => b,
      },
      GetPluginInfo: {
        path: '/csi.v1.Identity/GetPluginInfo',
        requestStream: false,
        responseStream: false,
        requestSerialize: () => Buffer.alloc(0),
        requestDeserialize: () => ({}),
        responseSerialize: () => Buffer.from([0x0a, 0x01, 0x78]), // name = "x"
        responseDeserialize: (b: Buffer) => b,
      },
    };
    server.addService(garbage, {
      Probe: (_c: unknown, cb: grpc.sendUnaryData<object>) => cb(null, {}),
      GetPluginInfo: (_c: unknown, cb: grpc.sendUnaryData<object>) => cb(null, {}),
    });
    await new Promise<void>((r, j) => server.bindAsync(`unix:${sock}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? j(e) : r())));
    servers.push({ dispose: () => new Promise<void>((r) => server.tryShutdown(() => r())) });
    const c = client();
    const err = (await c.probe().catch((e: unknown) => e)) as CSIError;
    expect(err).toBeInstanceOf(CSIError);
    expect(err.codeName).toBe('INTERNAL');
    expect(err.method).toBe('Probe');
    await expect(c.getPluginInfo()).resolves.toMatchObject({ name: 'x' });
  });

  it('maps a handler crash to INTERNAL with the reason', async () => {
    await serve({
      identity: {
        ...identity,
        GetPluginCapabilities: () => {
          throw new Error('disk on fire');
        },
      },
    });
    const err = (await client()
      .getPluginCapabilities()
      .catch((e: unknown) => e)) as CSIError;
    expect(err.codeName).toBe('INTERNAL');
    expect(err.message).toContain('disk on fire');
  });
});

describe('serveCsi socket handling', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-srv-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('replaces a stale socket, refuses a live one, and removes its socket on dispose', async () => {
    const sock = path.join(dir, 'nested', 'csi.sock');
    fs.mkdirSync(path.dirname(sock));
    // A socket file nobody listens on, as a crashed plugin leaves behind.
    spawnSync(process.execPath, [
      '-e',
      `require('net').createServer().listen(${JSON.stringify(sock)}, () => process.kill(process.pid, 'SIGKILL'))`,
    ]);
    expect(fs.existsSync(sock)).toBe(true);

    const s = await serveCsi(sock, { identity });
    await expect(serveCsi(`unix://${sock}`, { identity })).rejects.toBeInstanceOf(EndpointInUseError);
    await s.dispose();
    expect(fs.existsSync(sock)).toBe(false);
  });

  it('refuses to replace a file that is not a socket', async () => {
    const file = path.join(dir, 'csi.sock');
    fs.writeFileSync(file, 'x');
    await expect(serveCsi(file, { identity })).rejects.toBeInstanceOf(EndpointInUseError);
  });
});
