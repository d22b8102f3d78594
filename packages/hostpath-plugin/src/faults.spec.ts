// The fault switches' own logic, in process: the fault file (parsing, refusal,
// reading it again when it changes), the RPC fault wrapper (hang, slow, crash
// on an RPC, crash after N calls, UNIMPLEMENTED kept), and controller publish
// with its attachments file. The faults over a real socket and process are
// in test/faults.test.ts.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { MemoryLogger, ValidationError } from '@csiplug/core';
import { CSIStatusError, type CsiCallContext, type CsiServerHandlers, GrpcStatus } from '@csiplug/csi';
import {
  ATTACHED_TO_KEY,
  AttachmentStore,
  FaultSource,
  NO_RPC_FAULTS,
  type RpcFaults,
  csiRpcNames,
  parseFaultFile,
  readStartFault,
  withControllerPublish,
  withFaults,
} from './faults';
import { VolumeStore } from './volume-store';

const faults = (f: Partial<RpcFaults>): RpcFaults => ({ ...NO_RPC_FAULTS, ...f });

function context(rpc: string): { ctx: CsiCallContext; abort: () => void } {
  const ac = new AbortController();
  return { ctx: { rpc, signal: ac.signal, metadata: undefined as never }, abort: () => ac.abort() };
}

async function statusOf(p: Promise<unknown> | unknown): Promise<GrpcStatus | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    if (err instanceof CSIStatusError) return err.grpcCode;
    throw err;
  }
}

const baseHandlers = (): CsiServerHandlers => ({
  identity: { Probe: () => ({ ready: { value: true } }), GetPluginInfo: () => ({ name: 'x', vendorVersion: '1', manifest: {} }) },
  node: { NodeGetInfo: () => ({ nodeId: 'n1', maxVolumesPerNode: '0' }) },
});

type Call = (req: unknown, ctx: CsiCallContext) => unknown;
const call = (h: CsiServerHandlers, svc: 'identity' | 'node' | 'controller', rpc: string): Call =>
  (h[svc] as unknown as Record<string, Call>)[rpc]!;

describe('parseFaultFile', () => {
  it('reads the fields it is given; the rest are off', () => {
    expect(parseFaultFile('{"hangRpcs":["NodeStageVolume"],"slowRpcs":["Probe"],"slowMs":50}', 'f.json')).toEqual(
      faults({ hangRpcs: ['NodeStageVolume'], slowRpcs: ['Probe'], slowMs: 50 }),
    );
    expect(parseFaultFile('{}', 'f.json')).toEqual(NO_RPC_FAULTS);
  });

  it.each([
    ['not json'],
    ['[]'],
    ['{"hang":["Probe"]}'],
    ['{"hangRpcs":"Probe"}'],
    ['{"hangRpcs":["Probes"]}'],
    ['{"crashAfter":-1}'],
    ['{"slowMs":1.5}'],
  ])('refuses %s, naming the file', (text) => {
    expect(() => parseFaultFile(text, '/run/f.json')).toThrow(ValidationError);
    expect(() => parseFaultFile(text, '/run/f.json')).toThrow(/\/run\/f\.json/);
  });

  it('takes a start fault, read apart from the RPC faults', () => {
    expect(parseFaultFile('{"startFault":"no-socket","hangRpcs":["Probe"]}', 'f.json')).toEqual(faults({ hangRpcs: ['Probe'] }));
    expect(() => parseFaultFile('{"startFault":"explode"}', 'f.json')).toThrow(/startFault must be one of/);
  });

  it('knows the RPCs of all three services', () => {
    expect(csiRpcNames()).toEqual(
      expect.arrayContaining(['Probe', 'CreateVolume', 'ControllerPublishVolume', 'NodeStageVolume', 'NodeGetVolumeStats']),
    );
  });
});

describe('FaultSource', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-faults-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('without a file, the faults given at start', () => {
    const given = faults({ hangRpcs: ['Probe'] });
    const source = new FaultSource(given, undefined, new MemoryLogger());
    expect(source.dynamic).toBe(false);
    expect(source.current()).toBe(given);
  });

  it('a file replaces the given faults while it exists, is read again when it changes, and a refused one keeps the last good', () => {
    const file = path.join(dir, 'faults.json');
    const logger = new MemoryLogger();
    const source = new FaultSource(faults({ crashAfter: 9 }), file, logger);
    expect(source.current()).toEqual(faults({ crashAfter: 9 }));
    fs.writeFileSync(file, '{"hangRpcs":["NodeStageVolume"]}');
    expect(source.current()).toEqual(faults({ hangRpcs: ['NodeStageVolume'] }));
    fs.writeFileSync(file, '{"garbageRpcs":["NodePublishVolume","Probe"]}');
    expect(source.current()).toEqual(faults({ garbageRpcs: ['NodePublishVolume', 'Probe'] }));
    fs.writeFileSync(file, '{"garbageRpcs":["NoSuchRpc"]}');
    expect(source.current()).toEqual(faults({ garbageRpcs: ['NodePublishVolume', 'Probe'] }));
    expect(logger.records.some((r) => r.level === 'error' && String(r.fields['error']).includes('NoSuchRpc'))).toBe(true);
    fs.rmSync(file);
    expect(source.current()).toEqual(faults({ crashAfter: 9 }));
  });
});

describe('readStartFault', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-faults-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('reads the start fault of the file; none without a file or the field; a bad file throws', () => {
    const file = path.join(dir, 'f.json');
    expect(readStartFault(file)).toBeUndefined();
    fs.writeFileSync(file, '{"hangRpcs":["Probe"]}');
    expect(readStartFault(file)).toBeUndefined();
    fs.writeFileSync(file, '{"startFault":"not-grpc"}');
    expect(readStartFault(file)).toBe('not-grpc');
    fs.writeFileSync(file, '{"startFault":');
    expect(() => readStartFault(file)).toThrow(/f\.json/);
  });
});

describe('withFaults', () => {
  it('passes calls through when no fault is in force', async () => {
    const h = withFaults(baseHandlers(), new FaultSource(NO_RPC_FAULTS, undefined, new MemoryLogger()), {
      logger: new MemoryLogger(),
      crash: () => undefined,
    });
    expect(await call(h, 'node', 'NodeGetInfo')({}, context('NodeGetInfo').ctx)).toEqual({ nodeId: 'n1', maxVolumesPerNode: '0' });
    expect(h.controller).toBeUndefined();
  });

  it('an RPC without a handler still answers UNIMPLEMENTED', async () => {
    const h = withFaults(baseHandlers(), new FaultSource(NO_RPC_FAULTS, undefined, new MemoryLogger()), {
      logger: new MemoryLogger(),
      crash: () => undefined,
    });
    expect(await statusOf(call(h, 'node', 'NodeStageVolume')({}, context('NodeStageVolume').ctx))).toBe(GrpcStatus.UNIMPLEMENTED);
  });

  it('an unimplemented RPC answers UNIMPLEMENTED though the plugin has it (as democratic-csi for ListSnapshots); the others are untouched', async () => {
    const handlers = baseHandlers();
    let listed = 0;
    handlers.controller = { ...handlers.controller, ListSnapshots: () => ({ entries: [], nextToken: String(++listed) }) };
    const h = withFaults(handlers, new FaultSource(faults({ unimplementedRpcs: ['ListSnapshots'] }), undefined, new MemoryLogger()), {
      logger: new MemoryLogger(),
      crash: () => undefined,
    });
    expect(await statusOf(call(h, 'controller', 'ListSnapshots')({}, context('ListSnapshots').ctx))).toBe(GrpcStatus.UNIMPLEMENTED);
    expect(listed).toBe(0);
    expect(await call(h, 'node', 'NodeGetInfo')({}, context('NodeGetInfo').ctx)).toEqual({ nodeId: 'n1', maxVolumesPerNode: '0' });
  });

  it('an abnormal RPC answers as usual, with the volume condition abnormal; the others are untouched', async () => {
    const handlers = baseHandlers();
    handlers.node!.NodeGetVolumeStats = () => ({ usage: [], volumeCondition: { abnormal: false, message: 'healthy' } });
    const h = withFaults(handlers, new FaultSource(faults({ abnormalRpcs: ['NodeGetVolumeStats'] }), undefined, new MemoryLogger()), {
      logger: new MemoryLogger(),
      crash: () => undefined,
    });
    expect(await call(h, 'node', 'NodeGetVolumeStats')({}, context('NodeGetVolumeStats').ctx)).toEqual({
      usage: [],
      volumeCondition: { abnormal: true, message: expect.stringContaining('fault switch') },
    });
    expect(await call(h, 'node', 'NodeGetInfo')({}, context('NodeGetInfo').ctx)).toEqual({ nodeId: 'n1', maxVolumesPerNode: '0' });
  });

  it('an abnormal ControllerGetVolume has the condition where CSI keeps it (status.volume_condition), the volume and its nodes as they are', async () => {
    const handlers = baseHandlers();
    const volume = { volumeId: 'v1', capacityBytes: '1' };
    handlers.controller = {
      ControllerGetVolume: () => ({
        volume,
        status: { publishedNodeIds: ['n1'], volumeCondition: { abnormal: false, message: 'healthy' } },
      }),
    } as never;
    const h = withFaults(handlers, new FaultSource(faults({ abnormalRpcs: ['ControllerGetVolume'] }), undefined, new MemoryLogger()), {
      logger: new MemoryLogger(),
      crash: () => undefined,
    });
    expect(await call(h, 'controller', 'ControllerGetVolume')({}, context('ControllerGetVolume').ctx)).toEqual({
      volume,
      status: { publishedNodeIds: ['n1'], volumeCondition: { abnormal: true, message: expect.stringContaining('fault switch') } },
    });
  });

  it('a hung RPC answers only when the caller gives up; the others answer', async () => {
    const h = withFaults(baseHandlers(), new FaultSource(faults({ hangRpcs: ['NodeGetInfo'] }), undefined, new MemoryLogger()), {
      logger: new MemoryLogger(),
      crash: () => undefined,
    });
    const { ctx, abort } = context('NodeGetInfo');
    let settled = false;
    const hung = Promise.resolve(call(h, 'node', 'NodeGetInfo')({}, ctx)).finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(settled).toBe(false);
    expect(await statusOf(call(h, 'identity', 'Probe')({}, context('Probe').ctx))).toBe('ok');
    abort();
    expect(await statusOf(hung)).toBe(GrpcStatus.ABORTED);
  });

  it('a slow RPC answers late and does its work even when the caller gave up', async () => {
    let done = 0;
    const handlers = baseHandlers();
    handlers.node!.NodeGetInfo = () => {
      done++;
      return { nodeId: 'n1', maxVolumesPerNode: '0' };
    };
    const h = withFaults(handlers, new FaultSource(faults({ slowRpcs: ['NodeGetInfo'], slowMs: 120 }), undefined, new MemoryLogger()), {
      logger: new MemoryLogger(),
      crash: () => undefined,
    });
    const { ctx, abort } = context('NodeGetInfo');
    const started = Date.now();
    const answer = Promise.resolve(call(h, 'node', 'NodeGetInfo')({}, ctx));
    abort();
    await answer;
    expect(Date.now() - started).toBeGreaterThanOrEqual(110);
    expect(done).toBe(1);
  });

  it('crashes when a named RPC is called, and after N calls of any', async () => {
    const crashes: string[] = [];
    const logger = new MemoryLogger();
    const h = withFaults(baseHandlers(), new FaultSource(faults({ crashOnRpcs: ['NodeGetInfo'] }), undefined, logger), {
      logger,
      crash: () => crashes.push('crash'),
    });
    expect(await statusOf(call(h, 'identity', 'Probe')({}, context('Probe').ctx))).toBe('ok');
    expect(crashes).toEqual([]);
    expect(await statusOf(call(h, 'node', 'NodeGetInfo')({}, context('NodeGetInfo').ctx))).toBe(GrpcStatus.UNAVAILABLE);
    expect(crashes).toEqual(['crash']);

    const after: string[] = [];
    const h2 = withFaults(baseHandlers(), new FaultSource(faults({ crashAfter: 2 }), undefined, logger), {
      logger,
      crash: () => after.push('crash'),
    });
    for (let i = 0; i < 2; i++) expect(await statusOf(call(h2, 'identity', 'Probe')({}, context('Probe').ctx))).toBe('ok');
    expect(after).toEqual([]);
    expect(await statusOf(call(h2, 'identity', 'GetPluginInfo')({}, context('GetPluginInfo').ctx))).toBe(GrpcStatus.UNAVAILABLE);
    expect(after).toEqual(['crash']);
  });
});

describe('withControllerPublish', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-attach-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('adds PUBLISH_UNPUBLISH_VOLUME and keeps attachments in a file; publish is idempotent, unpublish of the unknown succeeds', async () => {
    const store = new VolumeStore(dir);
    await store.init();
    await store.put({ id: 'v1', name: 'v1', capacityBytes: '0', parameters: {}, createdAt: new Date().toISOString() });
    const attachments = new AttachmentStore(dir);
    const handlers: CsiServerHandlers = {
      ...baseHandlers(),
      controller: { ControllerGetCapabilities: () => ({ capabilities: [{ rpc: { type: 'CREATE_DELETE_VOLUME' } }] }) },
    };
    const h = withControllerPublish(handlers, store, attachments);
    const ctx = context('x').ctx;
    const caps = (await call(h, 'controller', 'ControllerGetCapabilities')({}, ctx)) as { capabilities: { rpc: { type: string } }[] };
    expect(caps.capabilities.map((c) => c.rpc.type)).toEqual(['CREATE_DELETE_VOLUME', 'PUBLISH_UNPUBLISH_VOLUME']);
    const publish = call(h, 'controller', 'ControllerPublishVolume');
    const cap = { mount: {}, accessMode: { mode: 'SINGLE_NODE_WRITER' } };
    expect(await publish({ volumeId: 'v1', nodeId: 'n1', volumeCapability: cap }, ctx)).toEqual({
      publishContext: { [ATTACHED_TO_KEY]: 'n1' },
    });
    await publish({ volumeId: 'v1', nodeId: 'n1', volumeCapability: cap }, ctx);
    expect(JSON.parse(fs.readFileSync(attachments.file, 'utf8'))).toEqual({ v1: ['n1'] });
    expect(await statusOf(publish({ volumeId: 'nope', nodeId: 'n1', volumeCapability: cap }, ctx))).toBe(GrpcStatus.NOT_FOUND);
    expect(await statusOf(publish({ volumeId: 'v1', nodeId: '', volumeCapability: cap }, ctx))).toBe(GrpcStatus.INVALID_ARGUMENT);
    const unpublish = call(h, 'controller', 'ControllerUnpublishVolume');
    await unpublish({ volumeId: 'v1', nodeId: 'n1' }, ctx);
    await unpublish({ volumeId: 'v1', nodeId: 'n1' }, ctx);
    await unpublish({ volumeId: 'nope', nodeId: 'n1' }, ctx);
    expect(attachments.read()).toEqual({});
  });

  it('leaves a plugin without a controller service as it is', () => {
    const handlers = baseHandlers();
    expect(withControllerPublish(handlers, new VolumeStore(dir), new AttachmentStore(dir))).toBe(handlers);
  });
});
