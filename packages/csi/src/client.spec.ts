import {
  AbortError,
  DefaultTimeoutPolicy,
  SeededRandom,
  ShutdownError,
  type MetricDef,
  type MetricLabels,
  type Metrics,
} from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { CSI_CALL_SECONDS, GrpcCSIClient } from './client';
import { mountCapability } from './capabilities';
import { CSIError, GrpcStatus, isNotFound, isRetryable } from './errors';
import type { CsiInvoker } from './invoker';
import type { CsiServiceKey } from './proto';

interface Recorded {
  service: CsiServiceKey;
  rpc: string;
  request: object;
  budgetMs: number;
  at: number;
}

/** A transport that answers from a script and records every attempt. */
class FakeInvoker implements CsiInvoker {
  calls: Recorded[] = [];
  disposals = 0;
  constructor(
    private readonly clock: FakeClock,
    private readonly respond: (rpc: string, attempt: number, request: object) => unknown = () => ({}),
  ) {}
  unary(service: CsiServiceKey, rpc: string, request: object, deadline: Date): Promise<unknown> {
    this.calls.push({ service, rpc, request, budgetMs: deadline.getTime() - Date.now(), at: this.clock.now() });
    const n = this.calls.filter((c) => c.rpc === rpc).length;
    return Promise.resolve().then(() => this.respond(rpc, n, request));
  }
  dispose(): void {
    this.disposals++;
  }
}

const fail = (code: number, details = 'boom') => {
  throw Object.assign(new Error(details), { code, details });
};

function setup(
  respond?: (rpc: string, attempt: number, request: object) => unknown,
  opts: { probe?: number; csiCall?: number; retry?: object; requireStaging?: boolean } = {},
) {
  const clock = new FakeClock();
  const invoker = new FakeInvoker(clock, respond);
  const client = new GrpcCSIClient(
    'unix:///run/plugins/a/csi.sock',
    {
      timeouts: new DefaultTimeoutPolicy({ probe: opts.probe ?? 5_000, csiCall: opts.csiCall ?? 120_000 }),
      clock,
      random: new SeededRandom(7),
    },
    { invoker, retry: opts.retry, requireStaging: opts.requireStaging },
  );
  return { clock, invoker, client };
}

async function settle<T>(p: Promise<T>, clock: FakeClock): Promise<T> {
  const guarded = p.then(
    (v) => ({ ok: true as const, v }),
    (e: unknown) => ({ ok: false as const, e }),
  );
  await clock.runAll();
  const r = await guarded;
  if (r.ok) return r.v;
  throw r.e;
}

const CAP = mountCapability('SINGLE_NODE_WRITER');

describe('GrpcCSIClient retries', () => {
  it.each([
    ['UNAVAILABLE', GrpcStatus.UNAVAILABLE],
    ['RESOURCE_EXHAUSTED', GrpcStatus.RESOURCE_EXHAUSTED],
    ['ABORTED', GrpcStatus.ABORTED],
  ])('retries %s and counts every attempt', async (_name, code) => {
    const { clock, invoker, client } = setup((_rpc, attempt) => (attempt < 3 ? fail(code) : { nodeId: 'n1' }));
    const res = await settle(client.nodeGetInfo(), clock);
    expect(res).toEqual({ nodeId: 'n1' });
    expect(invoker.calls).toHaveLength(3);
  });

  it.each([
    ['NOT_FOUND', GrpcStatus.NOT_FOUND],
    ['INVALID_ARGUMENT', GrpcStatus.INVALID_ARGUMENT],
    ['FAILED_PRECONDITION', GrpcStatus.FAILED_PRECONDITION],
    ['UNIMPLEMENTED', GrpcStatus.UNIMPLEMENTED],
    ['INTERNAL', GrpcStatus.INTERNAL],
    ['DEADLINE_EXCEEDED', GrpcStatus.DEADLINE_EXCEEDED],
    ['ALREADY_EXISTS', GrpcStatus.ALREADY_EXISTS],
  ])('does not retry %s', async (name, code) => {
    const { clock, invoker, client } = setup(() => fail(code, 'no'));
    const err = await settle(client.deleteVolume({ volumeId: 'v1' }), clock).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CSIError);
    expect((err as CSIError).codeName).toBe(name);
    expect((err as CSIError).attempts).toBe(1);
    expect(invoker.calls).toHaveLength(1);
  });

  it('stops at maxAttempts and reports how many were made', async () => {
    const { clock, invoker, client } = setup(() => fail(GrpcStatus.UNAVAILABLE, 'connect ECONNREFUSED'), { retry: { maxAttempts: 5 } });
    const err = (await settle(client.probe(), clock).catch((e: unknown) => e)) as CSIError;
    expect(invoker.calls).toHaveLength(5);
    expect(err.attempts).toBe(5);
    expect(isRetryable(err)).toBe(true);
    expect(err.message).toContain('after 5 attempts');
  });

  it('backs off exponentially with jitter, on the injected clock', async () => {
    const { clock, invoker, client } = setup(() => fail(GrpcStatus.UNAVAILABLE), {
      retry: { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 10_000, jitter: 0.5 },
    });
    await settle(client.getPluginInfo(), clock).catch(() => undefined);
    const gaps = invoker.calls.slice(1).map((c, i) => c.at - invoker.calls[i].at);
    expect(gaps).toHaveLength(4);
    gaps.forEach((gap, i) => {
      const nominal = 100 * 2 ** i;
      expect(gap).toBeGreaterThanOrEqual(nominal / 2);
      expect(gap).toBeLessThanOrEqual(nominal);
    });
  });

  it('never retries past the deadline', async () => {
    const { clock, invoker, client } = setup(() => fail(GrpcStatus.UNAVAILABLE), {
      csiCall: 1_000,
      retry: { maxAttempts: 10, baseDelayMs: 400, maxDelayMs: 10_000, jitter: 0 },
    });
    const start = clock.now();
    const err = (await settle(client.nodeGetInfo(), clock).catch((e: unknown) => e)) as CSIError;
    // attempt 1 at 0 ms, retry after 400 ms; the next retry (800 ms) would start past 1000 ms.
    expect(invoker.calls.map((c) => c.at - start)).toEqual([0, 400]);
    expect(err.attempts).toBe(2);
    expect(clock.now() - start).toBeLessThan(1_000);
  });

  it('retries codes given per call, and maxAttempts 1 disables retries', async () => {
    const a = setup((_r, n) => (n < 2 ? fail(GrpcStatus.INTERNAL) : {}));
    await settle(a.client.nodeGetInfo({ retry: { retryableCodes: [GrpcStatus.INTERNAL] } }), a.clock);
    expect(a.invoker.calls).toHaveLength(2);

    const b = setup(() => fail(GrpcStatus.UNAVAILABLE));
    await settle(b.client.nodeGetInfo({ retry: { maxAttempts: 1 } }), b.clock).catch(() => undefined);
    expect(b.invoker.calls).toHaveLength(1);
  });

  it('abandons the backoff wait when the signal aborts', async () => {
    const { clock, invoker, client } = setup(() => fail(GrpcStatus.UNAVAILABLE));
    const ac = new AbortController();
    const p = client.nodeGetInfo({ signal: ac.signal }).catch((e: unknown) => e);
    await clock.advance(0);
    expect(invoker.calls).toHaveLength(1);
    ac.abort();
    expect(await p).toBeInstanceOf(AbortError);
    await clock.runAll();
    expect(invoker.calls).toHaveLength(1);
  });

  it('does not send anything when the signal is already aborted', async () => {
    const { invoker, client } = setup();
    const ac = new AbortController();
    ac.abort();
    await expect(client.probe({ signal: ac.signal })).rejects.toBeInstanceOf(AbortError);
    expect(invoker.calls).toHaveLength(0);
  });
});

describe('GrpcCSIClient deadlines', () => {
  it('gives Probe the probe timeout and other calls the CSI call timeout', async () => {
    const { invoker, client } = setup(() => ({}), { probe: 50, csiCall: 60_000 });
    await client.probe();
    await client.nodeGetInfo();
    expect(invoker.calls[0].budgetMs).toBeLessThanOrEqual(50);
    expect(invoker.calls[1].budgetMs).toBeGreaterThan(50_000);
  });

  it('takes a per-call timeout', async () => {
    const { invoker, client } = setup();
    await client.nodeGetInfo({ timeoutMs: 30 });
    expect(invoker.calls[0].budgetMs).toBeLessThanOrEqual(30);
  });
});

describe('GrpcCSIClient input checks', () => {
  const cases: Array<[string, (c: GrpcCSIClient) => Promise<unknown>, string]> = [
    ['stage without volume id', (c) => c.nodeStageVolume({ stagingTargetPath: '/s', volumeCapability: CAP }), 'volume_id is required'],
    ['stage without staging path', (c) => c.nodeStageVolume({ volumeId: 'v', volumeCapability: CAP }), 'staging_target_path is required'],
    ['stage without capability', (c) => c.nodeStageVolume({ volumeId: 'v', stagingTargetPath: '/s' }), 'volume_capability is required'],
    ['publish without target', (c) => c.nodePublishVolume({ volumeId: 'v', volumeCapability: CAP }), 'target_path is required'],
    [
      'publish with capability lacking access type',
      (c) => c.nodePublishVolume({ volumeId: 'v', targetPath: '/t', volumeCapability: { accessMode: { mode: 'SINGLE_NODE_WRITER' } } }),
      'access type',
    ],
    [
      'publish with capability lacking mode',
      (c) => c.nodePublishVolume({ volumeId: 'v', targetPath: '/t', volumeCapability: { mount: {} } }),
      'access_mode is required',
    ],
    ['unpublish without target', (c) => c.nodeUnpublishVolume({ volumeId: 'v' }), 'target_path is required'],
    ['unstage without volume id', (c) => c.nodeUnstageVolume({ stagingTargetPath: '/s' }), 'volume_id is required'],
    ['create without capabilities', (c) => c.createVolume({ name: 'a', volumeCapabilities: [] }), 'at least one capability'],
    ['create without name', (c) => c.createVolume({ volumeCapabilities: [CAP] }), 'name is required'],
    ['delete without id', (c) => c.deleteVolume({}), 'volume_id is required'],
    ['validate without capabilities', (c) => c.validateVolumeCapabilities({ volumeId: 'v' }), 'at least one capability'],
    ['stats without path', (c) => c.nodeGetVolumeStats({ volumeId: 'v' }), 'volume_path is required'],
    ['controller publish without node', (c) => c.controllerPublishVolume({ volumeId: 'v', volumeCapability: CAP }), 'node_id is required'],
  ];
  it.each(cases)('refuses %s without touching the socket', async (_n, call, text) => {
    const { invoker, client } = setup();
    const err = (await call(client).catch((e: unknown) => e)) as CSIError;
    expect(err).toBeInstanceOf(CSIError);
    expect(err.grpcCode).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(err.local).toBe(true);
    expect(err.attempts).toBe(0);
    expect(err.message).toContain(text);
    expect(invoker.calls).toHaveLength(0);
  });

  it('requires a staging path once the plugin reported STAGE_UNSTAGE_VOLUME', async () => {
    const { invoker, client } = setup((rpc) =>
      rpc === 'NodeGetCapabilities' ? { capabilities: [{ rpc: { type: 'STAGE_UNSTAGE_VOLUME' }, type: 'rpc' }] } : {},
    );
    const req = { volumeId: 'v', targetPath: '/t', volumeCapability: CAP };
    await client.nodePublishVolume(req); // capabilities unknown yet: sent
    await client.nodeGetCapabilities();
    expect(client.knownNodeCapabilities?.stageUnstageVolume).toBe(true);
    await expect(client.nodePublishVolume(req)).rejects.toThrow(/staging_target_path is required/);
    await client.nodePublishVolume({ ...req, stagingTargetPath: '/s' });
    expect(invoker.calls.map((c) => c.rpc)).toEqual(['NodePublishVolume', 'NodeGetCapabilities', 'NodePublishVolume']);
  });

  it('requires a staging path when told so up front', async () => {
    const { client } = setup(undefined, { requireStaging: true });
    await expect(client.nodePublishVolume({ volumeId: 'v', targetPath: '/t', volumeCapability: CAP })).rejects.toThrow(
      /staging_target_path/,
    );
  });
});

describe('GrpcCSIClient results and errors', () => {
  it.each([
    [{ ready: null }, true],
    [{}, true],
    [{ ready: { value: true } }, true],
    [{ ready: { value: false } }, false],
  ])('probe answer %j means ready=%s', async (answer, ready) => {
    const { client } = setup(() => answer);
    await expect(client.probe()).resolves.toEqual({ ready });
  });

  it('maps a status to a CSIError with code, method and endpoint', async () => {
    const { client } = setup(() => fail(GrpcStatus.NOT_FOUND, 'volume "v9" does not exist'));
    const err = (await client.nodeUnstageVolume({ volumeId: 'v9', stagingTargetPath: '/s' }).catch((e: unknown) => e)) as CSIError;
    expect(isNotFound(err)).toBe(true);
    expect(err.method).toBe('NodeUnstageVolume');
    expect(err.endpoint).toBe('unix:///run/plugins/a/csi.sock');
    expect(err.code).toBe('ECSI_NOT_FOUND');
    expect(err.message).toContain('volume "v9" does not exist');
    expect(err.message).toContain('unix:///run/plugins/a/csi.sock');
  });

  it('is NOT_FOUND by code, not by text', async () => {
    const { client } = setup(() => fail(GrpcStatus.INTERNAL, 'volume not found'));
    const err = await client.deleteVolume({ volumeId: 'v' }).catch((e: unknown) => e);
    expect(isNotFound(err)).toBe(false);
  });

  it('sends requests to the right service', async () => {
    const { invoker, client } = setup();
    await client.getPluginInfo();
    await client.createVolume({ name: 'a', volumeCapabilities: [CAP] });
    await client.nodeGetInfo();
    expect(invoker.calls.map((c) => `${c.service}/${c.rpc}`)).toEqual([
      'identity/GetPluginInfo',
      'controller/CreateVolume',
      'node/NodeGetInfo',
    ]);
  });

  it('refuses calls after dispose and disposes the transport once', async () => {
    const { invoker, client } = setup();
    client.dispose();
    client.dispose();
    expect(invoker.disposals).toBe(1);
    await expect(client.probe()).rejects.toBeInstanceOf(ShutdownError);
  });
});

describe('GrpcCSIClient metrics', () => {
  /** Records what the client reports, as the Metrics contract receives it. */
  class RecordingMetrics implements Metrics {
    seen: { name: string; value: number; labels: Record<string, string> }[] = [];
    count(): void {
      throw new Error('the client only observes durations');
    }
    observe<L extends string>(def: MetricDef<L>, value: number, labels: MetricLabels<L>): void {
      this.seen.push({ name: def.name, value, labels: { ...labels } });
    }
  }

  function withMetrics(respond: (rpc: string, attempt: number) => unknown) {
    const clock = new FakeClock();
    const metrics = new RecordingMetrics();
    const invoker = new FakeInvoker(clock, (rpc, attempt) => {
      // Each call takes 40 ms of the fake clock: the advance runs beside the answer, as time passes beside a real call
      // (awaiting it here would wait on the timers settle's runAll fires). A timer that throws is logged, never lost.
      clock.advance(40).catch((err: unknown) => console.error('FakeClock.advance(40) failed under a fake CSI call', err));
      return respond(rpc, attempt);
    });
    const client = new GrpcCSIClient(
      'unix:///run/plugins/a/csi.sock',
      { timeouts: new DefaultTimeoutPolicy({}), clock, random: new SeededRandom(7), metrics },
      { invoker, retry: { maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 100, jitter: 0 } },
    );
    return { clock, metrics, client };
  }

  it('records each call once, retries included, by RPC and the code it ended with', async () => {
    const { clock, metrics, client } = withMetrics((_rpc, attempt) => (attempt < 2 ? fail(GrpcStatus.UNAVAILABLE) : { nodeId: 'n1' }));
    await settle(client.nodeGetInfo(), clock);
    expect(metrics.seen).toHaveLength(1);
    expect(metrics.seen[0]).toMatchObject({ name: CSI_CALL_SECONDS.name, labels: { rpc: 'NodeGetInfo', code: 'OK' } });
    // Measured on the injected clock, in seconds: at least the 40 ms an attempt took.
    expect(metrics.seen[0]!.value).toBeGreaterThanOrEqual(0.04);
  });

  it('a failed call carries its gRPC code; a request refused before sending is not a call', async () => {
    const { clock, metrics, client } = withMetrics(() => fail(GrpcStatus.NOT_FOUND, 'no such volume'));
    await expect(settle(client.nodeUnpublishVolume({ volumeId: 'v', targetPath: '/t' }), clock)).rejects.toThrow(CSIError);
    expect(metrics.seen.map((s) => s.labels)).toEqual([{ rpc: 'NodeUnpublishVolume', code: 'NOT_FOUND' }]);
    await expect(client.nodeUnpublishVolume({ volumeId: '', targetPath: '/t' })).rejects.toThrow(CSIError);
    expect(metrics.seen).toHaveLength(1);
  });
});
