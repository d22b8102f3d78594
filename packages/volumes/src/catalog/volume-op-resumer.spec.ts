// The catalog's operation intents and their resumer, over the real in-memory
// client state and registry with the fake controller client: a call held at
// a gate stands for an agent killed while it was out (a new catalog over
// the same state is the next agent); a failed answer for a lost one.
import { DefaultTimeoutPolicy, MemoryLogger, ValidationError } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { GrpcStatus } from '@csiplug/csi';
import { FakeCSIClientFactory, csiError } from '@csiplug/csi/testing';
import { type PluginInfo } from '@csiplug/csimanager';
import { FakeCSIManager, fakePluginInfo } from '@csiplug/csimanager/testing';
import { DynamicPluginRegistry, PluginDispenserTable, StateRegistryStore } from '@csiplug/registry';
import { type ClientStateDB, openClientState } from '@csiplug/state';
import { VolumeCatalog } from './volume-catalog';
import type { VolumeCatalogEvent } from './volume-catalog-service';
import { ClaimError } from './volume-claimer';
import { isVolumeOpIntent, mayHaveHappened } from './volume-op-intent';
import type { VolumeSpec } from './volume-spec';

const PLUGIN = 'hp';
const SOCKET = '/fake/csi.sock';

function info(type: string, over: Partial<PluginInfo> = {}): PluginInfo {
  const base = fakePluginInfo(type, PLUGIN);
  return fakePluginInfo(type, PLUGIN, {
    allocId: 'plugin-alloc',
    socketPath: SOCKET,
    healthy: true,
    description: 'healthy',
    ...over,
    ...(type === 'csi-node' ? { pluginCapabilities: { ...base.pluginCapabilities!, controllerService: true } } : {}),
  });
}

class Harness {
  readonly clock = new FakeClock();
  readonly logger = new MemoryLogger();
  readonly state: ClientStateDB = openClientState({ memory: true });
  readonly csi = new FakeCSIManager({ clock: this.clock });
  readonly controllers = new FakeCSIClientFactory();
  readonly controller = this.controllers.behaviourOf(SOCKET);
  readonly registry = new DynamicPluginRegistry(
    new StateRegistryStore(this.state),
    this.clock,
    this.logger,
    new DefaultTimeoutPolicy(),
    new PluginDispenserTable({ 'csi-controller': (plugin) => this.controllers.createClient(plugin.socketPath) }),
    {},
  );
  readonly events: VolumeCatalogEvent[] = [];
  readonly catalogs: VolumeCatalog[] = [];

  constructor() {
    this.controller.volumes = new Set<string>();
    for (const type of ['csi-node', 'csi-controller'])
      this.registry.register({ type, name: PLUGIN, allocId: 'plugin-alloc', socketPath: SOCKET, version: '1.0.0' });
    this.csi.set(info('csi-node'));
    this.csi.set(info('csi-controller'));
  }

  /** A catalog over the state (a new one is the next agent). */
  build(): VolumeCatalog {
    const catalog = new VolumeCatalog(
      this.state,
      this.csi,
      this.registry,
      this.clock,
      this.logger,
      (s) => structuredClone(s) as VolumeSpec,
    );
    catalog.onDidChange((e) => this.events.push(e));
    this.catalogs.push(catalog);
    return catalog;
  }

  /** Resolves with the next event of `kind` any catalog fires. */
  next(kind: VolumeCatalogEvent['kind']): Promise<VolumeCatalogEvent> {
    return new Promise((resolve) => {
      for (const c of this.catalogs) {
        const sub = c.onDidChange((e) => {
          if (e.kind !== kind) return;
          sub.dispose();
          resolve(e);
        });
      }
    });
  }

  dispose(): void {
    for (const c of this.catalogs) c.dispose();
    this.registry.dispose();
    this.state.dispose();
  }
}

function createSpec(over: Partial<VolumeSpec> = {}): VolumeSpec {
  return {
    id: 'data',
    name: 'data',
    type: 'csi',
    pluginId: PLUGIN,
    capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }],
    capacityMin: 10 << 20,
    parameters: {},
    secrets: {},
    context: {},
    ...over,
  };
}

let h: Harness;
beforeEach(() => {
  h = new Harness();
});
afterEach(() => h.dispose());

describe('volume operation intents', () => {
  it('a create cut short while CreateVolume was out: the next agent creates it again under the same name, records it and says so', async () => {
    const first = h.build();
    const gate = h.controller.gate('CreateVolume');
    const lost = first.createVolume(createSpec()).catch(() => undefined);
    await gate.reached;
    expect(h.state.getVolumeOp('data')).toMatchObject({ op: 'create', volumeId: 'data', request: { name: 'csiplug-data' } });

    const next = h.build();
    expect(next.interruptedOp('data')).toEqual({ op: 'create', since: h.clock.now() });
    const created = h.next('created');
    next.resumeInterruptedOps();
    const event = await created;
    expect(event.message).toMatch(
      /volume "data" created by plugin hp \(external id fake-csiplug-data, 10485760 bytes\): a create cut short .*, finished/,
    );
    expect(event.resumed).toEqual({ op: 'create', pluginId: PLUGIN, externalId: 'fake-csiplug-data' });
    expect(next.getVolume('data')).toMatchObject({ externalId: 'fake-csiplug-data', capacityBytes: 10 << 20 });
    expect(h.controller.callsOf('CreateVolume').map((c) => c.request.name)).toEqual(['csiplug-data', 'csiplug-data']);
    expect(h.state.getVolumeOp('data')).toBeUndefined();
    expect(h.logger.find('finished a volume create').length).toBe(1);
    gate.release();
    await lost;
  });

  it("a create cut short whose plugin answers with another catalog volume's storage: never deleted, never recorded twice; said", async () => {
    const first = h.build();
    // A volume registered before CSI names came from ids, whose storage the plugin knows by the name "data" now derives.
    (h.controller.volumes as Set<string>).add('fake-csiplug-data');
    await first.registerVolume(createSpec({ id: 'old', name: 'old', externalId: 'fake-csiplug-data' }));
    const gate = h.controller.gate('CreateVolume');
    const lost = first.createVolume(createSpec()).catch(() => undefined);
    await gate.reached;

    const next = h.build();
    const failed = h.next('resume-failed');
    next.resumeInterruptedOps();
    expect((await failed).message).toMatch(
      /volume "data": plugin hp answered CreateVolume "csiplug-data" with volume fake-csiplug-data, which is volume "old" already/,
    );
    expect(h.controller.callsOf('DeleteVolume')).toEqual([]);
    expect([...(h.controller.volumes as Set<string>)]).toEqual(['fake-csiplug-data']);
    expect(next.getVolume('old')).toMatchObject({ externalId: 'fake-csiplug-data' });
    expect(next.getVolume('data')).toBeUndefined();
    expect(h.state.getVolumeOp('data')).toBeUndefined();
    gate.release();
    await lost;
  });

  it('a create whose answer was lost (DEADLINE_EXCEEDED): the caller gets the error; what the plugin made is left on it and said, never deleted; creating the id again takes it up', async () => {
    const catalog = h.build();
    h.controller.failNext('CreateVolume', csiError(GrpcStatus.DEADLINE_EXCEEDED, 'CreateVolume', 'no answer in time'));
    const undone = h.next('create-undone');
    await expect(catalog.createVolume(createSpec())).rejects.toThrow(/could not create volume "data" on plugin "hp"/);
    const event = await undone;
    expect(event.message).toMatch(
      /plugin hp has volume fake-csiplug-data \(CSI name "csiplug-data"\) from a create .*; it is not recorded \(its create had failed as far as its caller knows\) and is left on the plugin, never deleted here/,
    );
    // The name comes from the id alone: this could be storage a deregister kept on purpose, so it is never deleted.
    expect(h.controller.callsOf('DeleteVolume')).toEqual([]);
    expect([...(h.controller.volumes as Set<string>)]).toEqual(['fake-csiplug-data']);
    expect(catalog.getVolume('data')).toBeUndefined();
    expect(h.state.getVolumeOp('data')).toBeUndefined();
    // The caller's retry finds the same storage (CSI: idempotent by name) and records it.
    expect(await catalog.createVolume(createSpec())).toMatchObject({ id: 'data', externalId: 'fake-csiplug-data' });
  });

  it('a create the plugin refused (INVALID_ARGUMENT) leaves no intent and nothing to undo', async () => {
    const catalog = h.build();
    h.controller.failNext('CreateVolume', csiError(GrpcStatus.INVALID_ARGUMENT, 'CreateVolume', 'bad parameter'));
    await expect(catalog.createVolume(createSpec())).rejects.toThrow(/bad parameter/);
    expect(h.state.getVolumeOp('data')).toBeUndefined();
    expect(h.controller.callsOf('CreateVolume')).toHaveLength(1);
  });

  it('an expand cut short while ControllerExpandVolume was out: the next agent expands again and records the new capacity', async () => {
    const first = h.build();
    await first.createVolume(createSpec());
    const controller = h.csi.pluginInfo('csi-controller', PLUGIN)!;
    h.csi.set({ ...controller, controller: { ...controller.controller!, supportsExpand: true } });
    const gate = h.controller.gate('ControllerExpandVolume');
    const lost = first.expandVolume('data', { capacityMin: 50 << 20 }).catch(() => undefined);
    await gate.reached;
    expect(h.state.getVolumeOp('data')).toMatchObject({ op: 'expand', fromBytes: 10 << 20, toBytes: 50 << 20 });

    const next = h.build();
    const expanded = h.next('expanded');
    next.resumeInterruptedOps();
    expect((await expanded).message).toMatch(/expanded from 10485760 to 52428800 bytes by plugin hp: an expand cut short/);
    expect(next.getVolume('data')).toMatchObject({ capacityBytes: 50 << 20, capacityMin: 50 << 20 });
    expect(h.state.getVolumeOp('data')).toBeUndefined();
    gate.release();
    await lost;
  });

  it('a delete cut short: the volume is not schedulable and refuses claims; the next agent finishes the delete once its controller is ready', async () => {
    const first = h.build();
    await first.createVolume(createSpec());
    const gate = h.controller.gate('DeleteVolume');
    const lost = first.deleteVolume('data').catch(() => undefined);
    await gate.reached;

    const next = h.build();
    expect(next.getVolume('data')).toMatchObject({ externalId: 'fake-csiplug-data', schedulable: false });
    const refused = await next
      .claim({ volumeId: 'data', allocId: 'a1', readOnly: false, accessMode: 'single-node-writer', attachmentMode: 'file-system' })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ClaimError);
    expect((refused as ClaimError).message).toBe(
      'volume "data" is being deleted (its delete is finished once its controller plugin is ready); alloc a1 cannot claim it',
    );

    // The controller away at start: the delete waits for it to be ready.
    h.csi.remove('csi-controller', PLUGIN);
    next.resumeInterruptedOps();
    expect(h.state.getVolumeOp('data')).toMatchObject({ op: 'delete' });
    const deleted = h.next('deleted');
    h.csi.set(info('csi-controller'));
    const event = await deleted;
    expect(event).toMatchObject({ volumeId: 'data', resumed: { op: 'delete', pluginId: PLUGIN, externalId: 'fake-csiplug-data' } });
    expect(next.getVolume('data')).toBeUndefined();
    expect(h.state.getVolumeOp('data')).toBeUndefined();
    expect(h.logger.find('finished a volume delete').length).toBe(1);
    gate.release();
    await lost;
  });

  it("a delete whose answer was lost (DEADLINE_EXCEEDED) is resumed with the call's own secrets over the volume's, which are never stored", async () => {
    const catalog = h.build();
    await catalog.createVolume(createSpec({ secrets: { userKey: 'volume-key' } }));
    const written = jest.spyOn(h.state, 'putVolumeOp');
    h.controller.failNext('DeleteVolume', csiError(GrpcStatus.DEADLINE_EXCEEDED, 'DeleteVolume', 'no answer in time'));
    const deleted = h.next('deleted');
    await expect(catalog.deleteVolume('data', { secrets: { userID: 'deleter', userKey: 'call-key' } })).rejects.toThrow(
      /could not delete volume "data"/,
    );
    await deleted;
    expect(h.controller.callsOf('DeleteVolume').map((c) => c.request.secrets)).toEqual([
      { userKey: 'call-key', userID: 'deleter' },
      { userKey: 'call-key', userID: 'deleter' },
    ]);
    expect(written).toHaveBeenCalled();
    expect(JSON.stringify(written.mock.calls)).not.toContain('call-key');
    expect(catalog.getVolume('data')).toBeUndefined();
  });

  it("an expand whose answer was lost is resumed with the register update's secrets it was sent with, which are not stored by it", async () => {
    const catalog = h.build();
    await catalog.createVolume(createSpec({ secrets: { userKey: 'volume-key' } }));
    const controller = h.csi.pluginInfo('csi-controller', PLUGIN)!;
    h.csi.set({ ...controller, controller: { ...controller.controller!, supportsExpand: true } });
    const written = jest.spyOn(h.state, 'putVolumeOp');
    h.controller.failNext('ControllerExpandVolume', csiError(GrpcStatus.DEADLINE_EXCEEDED, 'ControllerExpandVolume', 'no answer in time'));
    const expanded = h.next('expanded');
    await expect(catalog.expandVolume('data', { capacityMin: 50 << 20 }, { secrets: { userKey: 'rotated-key' } })).rejects.toThrow(
      /could not expand volume "data"/,
    );
    await expanded;
    expect(h.controller.callsOf('ControllerExpandVolume').map((c) => c.request.secrets)).toEqual([
      { userKey: 'rotated-key' },
      { userKey: 'rotated-key' },
    ]);
    expect(JSON.stringify(written.mock.calls)).not.toContain('rotated-key');
    expect(catalog.getVolume('data')).toMatchObject({ capacityBytes: 50 << 20 });
  });

  it('an intent this agent cannot read is reported and left alone', () => {
    h.state.putVolumeOp('odd', { op: 'shrink', volumeId: 'odd', pluginId: PLUGIN, since: 1 });
    const catalog = h.build();
    catalog.resumeInterruptedOps();
    expect(h.logger.find('a volume operation intent in the client state cannot be read').length).toBe(1);
    expect(h.state.getVolumeOp('odd')).toBeDefined();
    expect(catalog.interruptedOp('odd')).toBeUndefined();
  });

  it('tells a refusal from a call that may have been carried out', () => {
    expect(mayHaveHappened(csiError(GrpcStatus.UNAVAILABLE, 'CreateVolume'))).toBe(true);
    expect(mayHaveHappened(csiError(GrpcStatus.DEADLINE_EXCEEDED, 'CreateVolume'))).toBe(true);
    expect(mayHaveHappened(csiError(GrpcStatus.FAILED_PRECONDITION, 'DeleteVolume'))).toBe(false);
    expect(mayHaveHappened(new ValidationError('bad', 'x'))).toBe(true);
    expect(isVolumeOpIntent({ op: 'delete', volumeId: 'v', pluginId: 'p', since: 1, externalId: 'e' })).toBe(true);
    expect(isVolumeOpIntent({ op: 'expand', volumeId: 'v', pluginId: 'p', since: 1, externalId: 'e', fromBytes: 1 })).toBe(false);
  });
});

describe('what meets a pending intent', () => {
  it('an expand of a volume whose delete is pending is refused: the delete intent stays, the volume stays unschedulable, and the delete is finished', async () => {
    const first = h.build();
    await first.createVolume(createSpec());
    const controller = h.csi.pluginInfo('csi-controller', PLUGIN)!;
    h.csi.set({ ...controller, controller: { ...controller.controller!, supportsExpand: true } });
    // The last agent was killed after DeleteVolume went through and before the record was removed.
    h.state.putVolumeOp('data', {
      op: 'delete',
      volumeId: 'data',
      pluginId: PLUGIN,
      externalId: 'fake-csiplug-data',
      since: h.clock.now(),
    });
    (h.controller.volumes as Set<string>).delete('fake-csiplug-data');

    const next = h.build();
    // The storage is gone: the plugin answers NOT_FOUND to an expand.
    h.controller.failNext('ControllerExpandVolume', csiError(GrpcStatus.NOT_FOUND, 'ControllerExpandVolume', 'no such volume'));
    const refused = await next.expandVolume('data', { capacityMin: 50 << 20 }).catch((e: unknown) => e);
    // On the merged code the expand's intent replaced the delete's and its NOT_FOUND dropped it: a schedulable volume whose storage is gone.
    expect(h.state.getVolumeOp('data')).toMatchObject({ op: 'delete' });
    expect(next.getVolume('data')).toMatchObject({ schedulable: false });
    expect((refused as Error).message).toBe(
      'volume "data" is being deleted (its delete is finished once its controller plugin is ready); it cannot be expanded',
    );
    expect(h.controller.callsOf('ControllerExpandVolume')).toEqual([]);

    const deleted = h.next('deleted');
    next.resumeInterruptedOps();
    await deleted;
    expect(next.getVolume('data')).toBeUndefined();
  });

  it('a delete cut short, then the volume deregistered and registered again on its storage: the storage and the record stay', async () => {
    const first = h.build();
    await first.createVolume(createSpec());
    const gate = h.controller.gate('DeleteVolume');
    const lost = first.deleteVolume('data').catch(() => undefined);
    await gate.reached;

    // The next agent, its controller not ready yet: the operator keeps the storage after all (deregister, register again).
    const next = h.build();
    h.csi.remove('csi-controller', PLUGIN);
    next.resumeInterruptedOps();
    await next.deregisterVolume('data');
    await next.registerVolume(createSpec({ externalId: 'fake-csiplug-data' }));

    h.csi.set(info('csi-controller'));
    await new Promise((r) => setImmediate(r));
    // The pass the controller's readiness started, over.
    await (next as unknown as { resumer: { idle(): Promise<void> } }).resumer.idle();
    expect(h.controller.callsOf('DeleteVolume').slice(1)).toEqual([]);
    expect([...(h.controller.volumes as Set<string>)]).toEqual(['fake-csiplug-data']);
    expect(next.getVolume('data')).toMatchObject({ externalId: 'fake-csiplug-data', schedulable: true });
    expect(h.state.getVolumeOp('data')).toBeUndefined();
    expect(h.logger.find("a deregistered volume's delete").length).toBe(1);
    gate.release();
    await lost;
  });

  it('a delete intent whose storage another catalog volume has now: never deleted; said, and dropped', async () => {
    const catalog = h.build();
    (h.controller.volumes as Set<string>).add('fake-old');
    await catalog.registerVolume(createSpec({ id: 'kept', name: 'kept', externalId: 'fake-old' }));
    // Left by an agent of old (its volume 'data' is gone from the catalog; 'kept' has the storage now).
    h.state.putVolumeOp('data', { op: 'delete', volumeId: 'data', pluginId: PLUGIN, externalId: 'fake-old', since: h.clock.now() });
    const settled = Promise.race([h.next('resume-failed'), h.next('deleted')]);
    catalog.resumeInterruptedOps();
    expect(await settled).toMatchObject({
      kind: 'resume-failed',
      message: expect.stringMatching(/volume "data": .*fake-old.* is volume "kept"/),
    });
    expect(h.controller.callsOf('DeleteVolume')).toEqual([]);
    expect([...(h.controller.volumes as Set<string>)]).toEqual(['fake-old']);
    expect(h.state.getVolumeOp('data')).toBeUndefined();
  });
});
