// The volume catalog over the real in-memory client state and the real
// plugin registry, with the shared fakes of what it talks to: the CSI
// manager's (FakeCSIManager: plugin infos set by hand, waits recorded) and
// the plugin's controller client (FakeCSIClient: calls recorded, answers
// scripted), and a scripted spec check in place of the agent's (whose rules
// the agent tests with its checkVolumeSpec).
import { DefaultTimeoutPolicy, type Disposable, MemoryLogger, ValidationError, bind, registerCore } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { GrpcStatus } from '@csiplug/csi';
import { FakeCSIClientFactory, csiError } from '@csiplug/csi/testing';
import { ICSIManager, type PluginInfo } from '@csiplug/csimanager';
import { FakeCSIManager, fakePluginInfo } from '@csiplug/csimanager/testing';
import { DynamicPluginRegistry, IPluginRegistry, PluginDispenserTable, StateRegistryStore } from '@csiplug/registry';
import { type ClientStateDB, IClientStateDB, openClientState, bindStateStores } from '@csiplug/state';
import { container as rootContainer } from 'tsyringe';
import {
  VolumeExistsError,
  VolumeExternalIdInUseError,
  VolumeUpdateRefusedError,
  VolumeInUseError,
  VolumeNotFoundError,
  VolumePluginError,
  VolumeSpecValidatorMissingError,
} from './errors';
import { registerVolumeCatalog } from './register';
import { IVolumeCatalog, IVolumeClaimer, IVolumeSpecValidator } from './tokens';
import { csiVolumeName } from './csi-volume-name';
import { VolumeCatalog } from './volume-catalog';
import type { VolumeCatalogEvent } from './volume-catalog-service';
import { ClaimError, type VolumeClaimRequest, type VolumeClaimer } from './volume-claimer';
import type { VolumeSpec, VolumeSpecValidator } from './volume-spec';

const PLUGIN = 'hp';

// ---- fakes ---------------------------------------------------------------------

/** Where plugin "hp" listens: its registrations' socket, and so the socket of every controller client the registry dispenses. */
const SOCKET = '/fake/csi.sock';
/** The id FakeCSIClient's CreateVolume gives volume "data" (it answers fake-<name>; the name sent is csiVolumeName("data")). */
const CREATED_ID = 'fake-csiplug-data';

/** Fields both instances of plugin "hp" share: its alloc, its socket, and a health verdict. */
function instanceOf(healthy: boolean): Partial<PluginInfo> {
  return { allocId: 'plugin-alloc', socketPath: SOCKET, healthy, description: healthy ? 'healthy' : 'probe failed' };
}

/** The node instance of "hp" as the CSI manager reports it: a controller advertised unless told otherwise. */
function nodeInfo(opts: { healthy?: boolean; controllerService?: boolean; nodeId?: string } = {}): PluginInfo {
  const base = fakePluginInfo('csi-node', PLUGIN);
  return fakePluginInfo('csi-node', PLUGIN, {
    ...instanceOf(opts.healthy ?? true),
    pluginCapabilities: { ...base.pluginCapabilities!, controllerService: opts.controllerService ?? true },
    node: { ...base.node!, nodeId: opts.nodeId ?? 'storage-node-1' },
  });
}

/** The controller instance of "hp": CREATE_DELETE_VOLUME unless told otherwise, PUBLISH_UNPUBLISH_VOLUME only when told. */
function controllerInfo(opts: { healthy?: boolean; publish?: boolean; createDelete?: boolean } = {}): PluginInfo {
  const base = fakePluginInfo('csi-controller', PLUGIN);
  const publish = opts.publish ?? false;
  const createDelete = opts.createDelete ?? true;
  return fakePluginInfo('csi-controller', PLUGIN, {
    ...instanceOf(opts.healthy ?? true),
    controller: {
      ...base.controller!,
      supportsAttachDetach: publish,
      supportsCreateDelete: createDelete,
      capabilities: { ...base.controller!.capabilities, publishUnpublishVolume: publish, createDeleteVolume: createDelete },
    },
  });
}

/**
 * The spec check the catalog is given (IVolumeSpecValidator), scripted: it
 * records every spec, and by default refuses what is not an object and
 * passes a copy of anything else; a test swaps `check` to refuse or rewrite.
 */
class SpecCheck {
  readonly seen: unknown[] = [];
  check: (spec: unknown) => VolumeSpec = (spec) => {
    if (typeof spec !== 'object' || spec === null) throw new ValidationError('a volume spec is required', 'spec');
    return structuredClone(spec) as VolumeSpec;
  };
  readonly validator: VolumeSpecValidator = (spec) => {
    this.seen.push(spec);
    return this.check(spec);
  };
}

// ---- harness -------------------------------------------------------------------

class Harness implements Disposable {
  readonly clock = new FakeClock();
  readonly logger = new MemoryLogger();
  readonly state: ClientStateDB = openClientState({ memory: true });
  readonly csi = new FakeCSIManager({ clock: this.clock });
  /** The catalog has no business with volume managers (the reconciler's): checked when each test ends. */
  private readonly volumeManagerCalls = jest.spyOn(this.csi, 'volumeManager');
  /** Makes the controller clients the registry dispenses. */
  readonly controllers = new FakeCSIClientFactory();
  /** What plugin "hp"'s controller answers and what it was asked, shared by all its clients. */
  readonly controller = this.controllers.behaviourOf(SOCKET);
  readonly registry = new DynamicPluginRegistry(
    new StateRegistryStore(this.state),
    this.clock,
    this.logger,
    new DefaultTimeoutPolicy(),
    new PluginDispenserTable({ 'csi-controller': (plugin) => this.controllers.createClient(plugin.socketPath) }),
    {},
  );
  readonly specCheck = new SpecCheck();
  readonly events: VolumeCatalogEvent[] = [];
  catalog: VolumeCatalog;

  constructor() {
    this.controller.publishContext = { devicePath: '/dev/fake0' };
    this.catalog = this.build();
  }

  /** The requests of every call of `rpc` the controller got, in order. */
  requestsOf(rpc: string): Record<string, unknown>[] {
    return this.controller.callsOf(rpc).map((c) => c.request);
  }

  /** Controller clients the catalog opened and has not disposed. */
  openControllerClients(): number {
    return this.controllers.clients.filter((c) => !c.disposed).length;
  }

  /** A new catalog over the same state, as after an agent restart. */
  build(): VolumeCatalog {
    const catalog = new VolumeCatalog(this.state, this.csi, this.registry, this.clock, this.logger, this.specCheck.validator);
    catalog.onDidChange((e) => this.events.push(e));
    return catalog;
  }

  restart(): VolumeCatalog {
    this.catalog.dispose();
    this.catalog = this.build();
    return this.catalog;
  }

  /** A monolith plugin: node and controller registered and fingerprinted. */
  plugin(opts: { publish?: boolean; createDelete?: boolean; healthy?: boolean } = {}): void {
    for (const type of ['csi-node', 'csi-controller']) {
      this.registry.register({ type, name: PLUGIN, allocId: 'plugin-alloc', socketPath: SOCKET, version: '1.0.0' });
    }
    this.csi.set(nodeInfo({ healthy: opts.healthy }));
    this.csi.set(controllerInfo(opts));
  }

  /** Changes what the CSI manager reports of the plugin's node and controller instances (topology, max volumes, capabilities). */
  facts(node: Partial<NonNullable<PluginInfo['node']>>, controller: Partial<NonNullable<PluginInfo['controller']>> = {}): void {
    const n = this.csi.pluginInfo('csi-node', PLUGIN)!;
    this.csi.set({ ...n, node: { ...n.node!, ...node } });
    const c = this.csi.pluginInfo('csi-controller', PLUGIN);
    if (c)
      this.csi.set({
        ...c,
        controller: {
          ...c.controller!,
          ...controller,
          capabilities: { ...c.controller!.capabilities, ...(controller.capabilities ?? {}) },
        },
      });
  }

  /** A node-only plugin: no controller at all. */
  nodeOnlyPlugin(): void {
    this.registry.register({ type: 'csi-node', name: PLUGIN, allocId: 'plugin-alloc', socketPath: SOCKET, version: '1.0.0' });
    this.csi.set(nodeInfo({ controllerService: false }));
  }

  dispose(): void {
    expect(this.volumeManagerCalls).not.toHaveBeenCalled();
    this.catalog.dispose();
    this.registry.dispose();
    this.state.dispose();
  }
}

function spec(over: Partial<VolumeSpec> = {}): VolumeSpec {
  return {
    id: 'data',
    name: 'data',
    type: 'csi',
    pluginId: PLUGIN,
    externalId: 'ext-data',
    capabilities: [{ accessMode: 'single-node-writer', attachmentMode: 'file-system' }],
    parameters: {},
    secrets: { token: 's3cret' },
    context: { zone: 'a' },
    ...over,
  };
}

function req(allocId: string, over: Partial<VolumeClaimRequest> = {}): VolumeClaimRequest {
  return { volumeId: 'data', allocId, readOnly: false, accessMode: 'single-node-writer', attachmentMode: 'file-system', ...over };
}

/** Whether `p` settles while the event loop turns over a few times (no timer: a call queued behind a lock that is never let go does not). */
async function settles(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 50 && !done; i++) await new Promise((r) => setImmediate(r));
  return done;
}

async function refused(p: Promise<unknown>): Promise<ClaimError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ClaimError) return err;
    throw err;
  }
  throw new Error('expected the claim to be refused');
}

let h: Harness;
beforeEach(() => {
  h = new Harness();
});
afterEach(() => h.dispose());

// ---- register / deregister -------------------------------------------------------

describe('register and deregister', () => {
  test('registers before the plugin runs; schedulable follows the plugin health at read time', async () => {
    const view = await h.catalog.registerVolume(spec({ mountOptions: { mountFlags: ['noatime'] } }));
    expect(view).toMatchObject({
      id: 'data',
      externalId: 'ext-data',
      pluginId: PLUGIN,
      schedulable: false,
      claims: [],
      createdAt: h.clock.now(),
    });
    expect(view).not.toHaveProperty('controllerPublished');
    expect(h.events).toEqual([{ volumeId: 'data', kind: 'registered', message: expect.stringContaining('ext-data') }]);
    expect(h.state.getVolume<{ id: string }>('data')?.id).toBe('data');

    h.plugin();
    expect(h.catalog.getVolume('data')?.schedulable).toBe(true);
    h.csi.set(nodeInfo({ healthy: false }));
    expect(h.catalog.getVolume('data')?.schedulable).toBe(false);
    // A plugin with a controller needs it healthy too.
    h.csi.set(nodeInfo());
    h.csi.set(controllerInfo({ healthy: false }));
    expect(h.catalog.getVolume('data')?.schedulable).toBe(false);
  });

  test('a node-only plugin is schedulable without a controller', async () => {
    h.nodeOnlyPlugin();
    expect((await h.catalog.registerVolume(spec())).schedulable).toBe(true);
  });

  test('refuses another external id under a registered id, a missing external id and bad specs, storing nothing', async () => {
    await h.catalog.registerVolume(spec());
    await expect(h.catalog.registerVolume(spec({ externalId: 'other' }))).rejects.toBeInstanceOf(VolumeUpdateRefusedError);
    await expect(h.catalog.registerVolume(spec({ externalId: 'other' }))).rejects.toThrow(
      'volume "data" is registered already and cannot be updated as asked: its external id cannot change (it is "ext-data", the spec says "other")',
    );
    expect(h.catalog.getVolume('data')!.externalId).toBe('ext-data');

    const noExternal = spec({ id: 'v2' });
    delete noExternal.externalId;
    await expect(h.catalog.registerVolume(noExternal)).rejects.toThrow(/external_id is required/);
    await expect(h.catalog.registerVolume(null as unknown as VolumeSpec)).rejects.toBeInstanceOf(ValidationError);
    // What makes a spec bad is the bound check's call (the agent's rules —
    // capabilities, path-safe ids, modes, capacities — are tested with its
    // checkVolumeSpec); its refusal stands, for register and create alike.
    h.specCheck.check = (s) => {
      throw new ValidationError(`volume ${JSON.stringify((s as VolumeSpec).id)}: capability is required`, 'capability');
    };
    await expect(h.catalog.registerVolume(spec({ id: 'v3', capabilities: [] }))).rejects.toBeInstanceOf(ValidationError);
    await expect(h.catalog.registerVolume(spec({ id: '../etc' }))).rejects.toThrow('volume "../etc": capability is required');
    const toCreate = spec({ id: 'v4' });
    delete toCreate.externalId;
    await expect(h.catalog.createVolume(toCreate)).rejects.toThrow('volume "v4": capability is required');
    expect(h.specCheck.seen.map((s) => (s as VolumeSpec | null)?.id)).toEqual([
      'data',
      'data',
      'data',
      'v2',
      undefined,
      'v3',
      '../etc',
      'v4',
    ]);
    expect(h.catalog.listVolumes().map((v) => v.id)).toEqual(['data']);
    expect(h.controller.calls).toEqual([]);
  });

  test('a register of a claimed volume updates its secrets and context, keeps its claim and publish, and is stored (a restarted catalog has it)', async () => {
    h.plugin({ publish: true });
    await h.catalog.registerVolume(spec());
    await h.catalog.claim(req('a1'));
    const updated = await h.catalog.registerVolume(spec({ secrets: { token: 'rotated' }, context: { zone: 'b' } }));
    expect(updated.claims.map((c) => c.allocId)).toEqual(['a1']);
    expect(updated.publishContexts).toEqual({ a1: { devicePath: '/dev/fake0' } });
    expect(h.events.at(-1)).toEqual({
      volumeId: 'data',
      kind: 'updated',
      message: 'volume "data" updated by a new register (secrets, context, capabilities); its 1 claim kept',
    });
    // The plugin checked the volume with the new secrets before they were kept.
    expect(h.requestsOf('ValidateVolumeCapabilities').at(-1)).toMatchObject({
      secrets: { token: 'rotated' },
      volumeContext: { zone: 'b' },
    });
    // What the next stage and publish get (the claim's volume) has the new secrets, also after a restart.
    const catalog = h.restart();
    expect((await catalog.lookup('data')).secrets).toEqual({ token: 'rotated' });
    const again = await catalog.claim(req('a1'));
    expect(again.volume).toMatchObject({ secrets: { token: 'rotated' }, context: { zone: 'b' } });
    expect(catalog.getVolume('data')!.claims.map((c) => c.allocId)).toEqual(['a1']);
    // Refused: nothing stored.
    await expect(catalog.registerVolume(spec({ mountOptions: { mountFlags: ['ro'] } }))).rejects.toThrow(
      'its mount options cannot change while it is in use (claimed by a1); stop the allocs first',
    );
    expect(catalog.getVolume('data')!.mountOptions).toBeUndefined();
  });

  test('a register update checked first stores nothing: the growth it needs, a refusal, a claimed volume whose plugin does not expand ONLINE', async () => {
    h.plugin();
    h.facts({}, { supportsExpand: true });
    await h.catalog.registerVolume(spec({ capacityMin: 1000 }));
    await h.catalog.claim(req('a1'));
    expect(h.catalog.checkRegisterUpdate(spec({ capacityMin: 2000, secrets: { token: 'rotated' } }))).toEqual({ growTo: 2000 });
    expect(h.catalog.checkRegisterUpdate(spec({ capacityMax: 5000 }))).toEqual({});
    expect(h.catalog.checkRegisterUpdate(spec({ id: 'unknown' }))).toEqual({});
    expect(() => h.catalog.checkRegisterUpdate(spec({ capacityMax: 500, secrets: { token: 'rotated' } }))).toThrow(
      'its capacity_max 500 is below the 1000 bytes it has: volumes only grow; give a capacity_max of at least 1000',
    );
    // The agent grows before it stores: a plugin that does not expand ONLINE refuses the claimed volume, and the update is never stored.
    await expect(h.catalog.expandVolume('data', { capacityMin: 2000 })).rejects.toBeInstanceOf(VolumeInUseError);
    expect(h.catalog.getVolume('data')).toMatchObject({ capacityMin: 1000 });
    expect((await h.catalog.lookup('data')).secrets).toEqual({ token: 's3cret' });
    // The stored update records the range asked for.
    expect(await h.catalog.registerVolume(spec({ capacityMin: 800, capacityMax: 5000 }))).toMatchObject({
      capacityMin: 800,
      capacityMax: 5000,
    });
    expect(h.requestsOf('ControllerExpandVolume')).toEqual([]);
  });

  test("refuses a second volume on a plugin volume another volume has (claimed or not) with a 409 naming it; another plugin's same id is another volume", async () => {
    h.nodeOnlyPlugin();
    await h.catalog.registerVolume(spec());
    const second = h.catalog.registerVolume(spec({ id: 'second' }));
    await expect(second).rejects.toBeInstanceOf(VolumeExternalIdInUseError);
    await expect(h.catalog.registerVolume(spec({ id: 'second' }))).rejects.toThrow(
      'volume "second": plugin "hp" volume "ext-data" is volume "data" already; use volume "data", or deregister it first',
    );
    await h.catalog.claim(req('a1'));
    await expect(h.catalog.registerVolume(spec({ id: 'third' }))).rejects.toMatchObject({
      code: 'EVOLUME_EXTERNAL_ID_IN_USE',
      holderId: 'data',
    });
    expect(h.catalog.listVolumes().map((v) => v.id)).toEqual(['data']);
    await expect(h.catalog.registerVolume(spec({ id: 'elsewhere', pluginId: 'other' }))).resolves.toMatchObject({
      id: 'elsewhere',
      externalId: 'ext-data',
    });
    // Two registers of one plugin volume at once (each waits for the plugin's check): one wins.
    h.plugin();
    const both = await Promise.allSettled([
      h.catalog.registerVolume(spec({ id: 'x', externalId: 'ext-x' })),
      h.catalog.registerVolume(spec({ id: 'y', externalId: 'ext-x' })),
    ]);
    expect(both.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect(h.catalog.listVolumes().filter((v) => v.externalId === 'ext-x')).toHaveLength(1);
    // Once the first is gone, the plugin volume may be registered under another id.
    await h.catalog.deregisterVolume('data', { force: true });
    await expect(h.catalog.registerVolume(spec({ id: 'second' }))).resolves.toMatchObject({ id: 'second', externalId: 'ext-data' });
  });

  test('stores the spec the check answers with, not the one it was given', async () => {
    h.specCheck.check = (s) => ({ ...(s as VolumeSpec), name: 'canonical', context: { zone: 'b' } });
    const given = spec();
    const view = await h.catalog.registerVolume(given);
    expect(view).toMatchObject({ id: 'data', name: 'canonical', context: { zone: 'b' } });
    expect(h.catalog.getVolume('data')).toMatchObject({ name: 'canonical', context: { zone: 'b' } });
    expect(given).toEqual(spec());
  });

  test('lists volumes sorted by id; lookup gives what the csi hook needs', async () => {
    await h.catalog.registerVolume(spec({ id: 'zeta', externalId: 'z' }));
    await h.catalog.registerVolume(spec({ id: 'alpha', externalId: 'a', mountOptions: { fsType: 'ext4', mountFlags: ['noatime'] } }));
    expect(h.catalog.listVolumes().map((v) => v.id)).toEqual(['alpha', 'zeta']);
    await expect(h.catalog.lookup('alpha')).resolves.toEqual({
      id: 'alpha',
      externalId: 'a',
      pluginId: PLUGIN,
      secrets: { token: 's3cret' },
      context: { zone: 'a' },
      mountOptions: { fsType: 'ext4', mountFlags: ['noatime'] },
    });
    const err = await refused(h.catalog.lookup('nope'));
    expect(err.retryable).toBe(false);
    expect(err.message).toMatch(/volume "nope" is not registered/);
  });

  test('deregister refuses while claimed unless forced; unknown ids are an error', async () => {
    h.nodeOnlyPlugin();
    await h.catalog.registerVolume(spec());
    await h.catalog.claim(req('a1'));
    await expect(h.catalog.deregisterVolume('data')).rejects.toBeInstanceOf(VolumeInUseError);
    await expect(h.catalog.deregisterVolume('data')).rejects.toThrow(/claimed by alloc a1/);
    expect(h.catalog.getVolume('data')).toBeDefined();
    await h.catalog.deregisterVolume('data', { force: true });
    expect(h.catalog.getVolume('data')).toBeUndefined();
    expect(h.events.at(-1)).toMatchObject({ kind: 'deregistered', volumeId: 'data', message: expect.stringContaining('forced') });
    await expect(h.catalog.deregisterVolume('data')).rejects.toBeInstanceOf(VolumeNotFoundError);

    await h.catalog.registerVolume(spec());
    await h.catalog.deregisterVolume('data');
    expect(h.catalog.listVolumes()).toEqual([]);
  });

  test('malformed records in the state are skipped with a log line', async () => {
    await h.catalog.registerVolume(spec());
    h.state.putVolume('junk', { id: 'junk' });
    expect(h.catalog.listVolumes().map((v) => v.id)).toEqual(['data']);
    expect(h.catalog.getVolume('junk')).toBeUndefined();
    expect(
      h.logger.find('volume record in the client state is malformed; ignoring it (register the volume again to replace it)').length,
    ).toBeGreaterThan(0);
  });
});

// ---- claims --------------------------------------------------------------------------

describe('claims', () => {
  beforeEach(async () => {
    h.nodeOnlyPlugin();
    await h.catalog.registerVolume(
      spec({
        capabilities: [
          { accessMode: 'single-node-writer', attachmentMode: 'file-system' },
          { accessMode: 'single-node-reader-only', attachmentMode: 'file-system' },
        ],
      }),
    );
    h.events.length = 0;
  });

  test('an unknown volume is refused for good', async () => {
    const err = await refused(h.catalog.claim(req('a1', { volumeId: 'ghost' })));
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('volume "ghost" is not registered');
    expect(err.message).toContain('a1');
  });

  test('a mode the volume lacks is refused for good, naming both', async () => {
    const err = await refused(h.catalog.claim(req('a1', { accessMode: 'multi-node-multi-writer' })));
    expect(err.retryable).toBe(false);
    expect(err.message).toContain('multi-node-multi-writer');
    expect(err.message).toContain('single-node-writer/file-system');
  });

  test('single-node-writer: a second writer is refused retryably until the first releases; readers may join', async () => {
    const first = await h.catalog.claim(req('a1'));
    expect(first).toEqual({ volume: expect.objectContaining({ id: 'data', externalId: 'ext-data' }) });
    expect(first.publishContext).toBeUndefined();
    const err = await refused(h.catalog.claim(req('a2')));
    expect(err.retryable).toBe(true);
    expect(err.message).toContain('a1');
    await h.catalog.claim(req('a3', { readOnly: true }));
    expect(h.catalog.getVolume('data')?.claims.map((c) => `${c.allocId}:${c.mode}`)).toEqual(['a1:write', 'a3:read']);

    await h.catalog.release('data', 'a1');
    await h.catalog.claim(req('a2'));
    expect(h.catalog.getVolume('data')?.claims.map((c) => `${c.allocId}:${c.mode}`)).toEqual(['a3:read', 'a2:write']);
    expect(h.events.map((e) => `${e.kind}:${e.allocId}`)).toEqual(['claimed:a1', 'claimed:a3', 'released:a1', 'claimed:a2']);
  });

  test('reader-only: a write claim is refused for good; other modes wait while it is in use', async () => {
    const err = await refused(h.catalog.claim(req('a1', { accessMode: 'single-node-reader-only' })));
    expect(err.retryable).toBe(false);
    await h.catalog.claim(req('a1', { accessMode: 'single-node-reader-only', readOnly: true }));
    await h.catalog.claim(req('a2', { accessMode: 'single-node-reader-only', readOnly: true }));
    const other = await refused(h.catalog.claim(req('a3')));
    expect(other.retryable).toBe(true);
    expect(other.message).toContain('single-node-reader-only/file-system');
  });

  test('re-claiming is idempotent: same claim, same since, no event, persisted once', async () => {
    await h.catalog.claim(req('a1'));
    const since = h.catalog.getVolume('data')!.claims[0]!.since;
    await h.clock.advance(5_000);
    await h.catalog.claim(req('a1'));
    expect(h.catalog.getVolume('data')!.claims).toEqual([
      { allocId: 'a1', mode: 'write', accessMode: 'single-node-writer', attachmentMode: 'file-system', since },
    ]);
    expect(h.events.filter((e) => e.kind === 'claimed')).toHaveLength(1);
    // The same alloc changing its mind keeps its place in time.
    await h.catalog.claim(req('a1', { readOnly: true }));
    expect(h.catalog.getVolume('data')!.claims).toEqual([
      { allocId: 'a1', mode: 'read', accessMode: 'single-node-writer', attachmentMode: 'file-system', since },
    ]);
  });

  test('claims are written through and survive a new catalog over the same state', async () => {
    await h.catalog.claim(req('a1'));
    const stored = h.state.getVolume<{ claims: { allocId: string }[] }>('data');
    expect(stored?.claims.map((c) => c.allocId)).toEqual(['a1']);
    const catalog = h.restart();
    expect(catalog.getVolume('data')?.claims.map((c) => c.allocId)).toEqual(['a1']);
    expect((await refused(catalog.claim(req('a2')))).retryable).toBe(true);
    await catalog.release('data', 'a1');
    h.restart();
    expect(h.catalog.getVolume('data')?.claims).toEqual([]);
  });

  test('releasing an unknown claim or volume is fine and says nothing', async () => {
    await h.catalog.release('data', 'nobody');
    await h.catalog.release('ghost', 'a1');
    expect(h.events).toEqual([]);
  });

  test('claims of one volume are granted one at a time', async () => {
    h.plugin({ publish: true });
    const gate = h.controller.gate('ControllerPublishVolume');
    const first = h.catalog.claim(req('a1'));
    const second = h.catalog.claim(req('a2'));
    await gate.reached;
    await h.clock.advance(0);
    // The first claim is held at the controller; the second has not got there.
    expect(h.requestsOf('ControllerPublishVolume')).toHaveLength(1);
    gate.release();
    await expect(first).resolves.toBeDefined();
    expect((await refused(second)).retryable).toBe(true);
    expect(h.requestsOf('ControllerPublishVolume')).toHaveLength(1);
  });

  test('a claim waiting for the lock gives up when its signal aborts', async () => {
    h.plugin({ publish: true });
    const gate = h.controller.gate('ControllerPublishVolume');
    const first = h.catalog.claim(req('a1'));
    const ac = new AbortController();
    const second = h.catalog.claim(req('a2', { readOnly: true }), { signal: ac.signal });
    ac.abort();
    await expect(second).rejects.toThrow(/abort/i);
    gate.release();
    await first;
    expect(h.catalog.getVolume('data')?.claims.map((c) => c.allocId)).toEqual(['a1']);
  });

  test("volumesHeldBy names the volumes a gone alloc holds; releasing each drops its claims, no other alloc's", async () => {
    await h.catalog.registerVolume(
      spec({
        id: 'logs',
        externalId: 'ext-logs',
        capabilities: [{ accessMode: 'multi-node-multi-writer', attachmentMode: 'file-system' }],
      }),
    );
    await h.catalog.claim(req('a1'));
    await h.catalog.claim(req('a1', { volumeId: 'logs', accessMode: 'multi-node-multi-writer' }));
    await h.catalog.claim(req('a2', { volumeId: 'logs', accessMode: 'multi-node-multi-writer' }));
    expect(h.catalog.volumesHeldBy('a1')).toEqual(['data', 'logs']);
    expect(h.catalog.volumesHeldBy('a2')).toEqual(['logs']);
    expect(h.catalog.volumesHeldBy('a3')).toEqual([]);
    // What the agent's claim sweep does for a purged alloc (ClaimSweep.releaseAllOf, through the claimer).
    for (const id of h.catalog.volumesHeldBy('a1')) await h.catalog.release(id, 'a1');
    expect(h.catalog.getVolume('data')?.claims).toEqual([]);
    expect(h.catalog.getVolume('logs')?.claims.map((c) => c.allocId)).toEqual(['a2']);
    expect(h.catalog.volumesHeldBy('a1')).toEqual([]);
  });

  test('a listener that throws does not break the catalog', async () => {
    h.catalog.onDidChange(() => {
      throw new Error('listener bug');
    });
    await h.catalog.claim(req('a1'));
    expect(h.events.map((e) => e.kind)).toEqual(['claimed']);
    expect(h.logger.find('a volume catalog event listener threw; the other listeners still ran')).toHaveLength(1);
  });
});

// ---- controller publish ------------------------------------------------------------------

describe('controller publish and unpublish', () => {
  test('not called when the controller does not advertise PUBLISH_UNPUBLISH_VOLUME', async () => {
    h.plugin({ publish: false });
    await h.catalog.registerVolume(spec());
    const result = await h.catalog.claim(req('a1'));
    expect(result.publishContext).toBeUndefined();
    await h.catalog.release('data', 'a1');
    // Only the register's check of the volume reached the controller.
    expect(h.controller.calls.map((c) => c.method)).toEqual(['ValidateVolumeCapabilities']);
  });

  test('not called (and not waited for) for a node-only plugin', async () => {
    h.nodeOnlyPlugin();
    await h.catalog.registerVolume(spec());
    await h.catalog.claim(req('a1'));
    expect(h.controller.calls).toEqual([]);
    expect(h.csi.waits).toEqual([]);
  });

  test("publishes to the node plugin's node id, returns and persists the publish context, unpublishes on release", async () => {
    h.plugin({ publish: true });
    await h.catalog.registerVolume(spec({ mountOptions: { mountFlags: ['noatime'] } }));
    const result = await h.catalog.claim(req('a1', { readOnly: true }));
    expect(result.publishContext).toEqual({ devicePath: '/dev/fake0' });
    expect(h.requestsOf('ControllerPublishVolume')).toEqual([
      {
        volumeId: 'ext-data',
        nodeId: 'storage-node-1',
        volumeCapability: {
          mount: { fsType: '', mountFlags: ['noatime'], volumeMountGroup: '' },
          accessMode: { mode: 'SINGLE_NODE_WRITER' },
        },
        readonly: true,
        secrets: { token: 's3cret' },
        volumeContext: { zone: 'a' },
      },
    ]);
    expect(h.catalog.getVolume('data')?.publishContexts).toEqual({ a1: { devicePath: '/dev/fake0' } });
    expect(h.events.at(-1)?.message).toContain('published to node storage-node-1');

    // Re-claim (say, after an agent restart): the saved context, no second publish.
    const catalog = h.restart();
    await expect(catalog.claim(req('a1', { readOnly: true }))).resolves.toEqual(result);
    expect(h.requestsOf('ControllerPublishVolume')).toHaveLength(1);

    // The node plugin gone: release still unpublishes from the node it published to.
    h.csi.remove('csi-node', PLUGIN);
    await catalog.release('data', 'a1');
    expect(h.requestsOf('ControllerUnpublishVolume')).toEqual([
      { volumeId: 'ext-data', nodeId: 'storage-node-1', secrets: { token: 's3cret' } },
    ]);
    expect(catalog.getVolume('data')?.publishContexts).toBeUndefined();
    expect(catalog.getVolume('data')?.claims).toEqual([]);
    expect(h.controllers.clients.length).toBeGreaterThan(0);
    expect(h.openControllerClients()).toBe(0);
  });

  test('an empty publish context still counts as published', async () => {
    h.plugin({ publish: true });
    h.controller.publishContext = {};
    await h.catalog.registerVolume(spec());
    expect((await h.catalog.claim(req('a1'))).publishContext).toEqual({});
    await h.catalog.release('data', 'a1');
    expect(h.requestsOf('ControllerUnpublishVolume')).toHaveLength(1);
  });

  test('a failed publish grants nothing: retryable when the plugin may recover, final when it refused', async () => {
    h.plugin({ publish: true });
    await h.catalog.registerVolume(spec());
    h.controller.failures.set('ControllerPublishVolume', csiError(GrpcStatus.UNAVAILABLE, 'ControllerPublishVolume'));
    const busy = await refused(h.catalog.claim(req('a1')));
    expect(busy.retryable).toBe(true);
    expect(busy.message).toContain('could not publish volume "data"');
    h.controller.failures.set('ControllerPublishVolume', csiError(GrpcStatus.INVALID_ARGUMENT, 'ControllerPublishVolume'));
    expect((await refused(h.catalog.claim(req('a1')))).retryable).toBe(false);
    expect(h.catalog.getVolume('data')?.claims).toEqual([]);
    h.controller.failures.clear();
    await h.catalog.claim(req('a1'));
    expect(h.catalog.getVolume('data')?.claims.map((c) => c.allocId)).toEqual(['a1']);
  });

  test('a controller registration gone between fingerprint and publish is a retryable refusal', async () => {
    h.plugin({ publish: true });
    await h.catalog.registerVolume(spec());
    h.registry.deregister('csi-controller', PLUGIN, 'plugin-alloc');
    const err = await refused(h.catalog.claim(req('a1')));
    expect(err.retryable).toBe(true);
    expect(h.catalog.getVolume('data')?.claims).toEqual([]);
  });

  test('a plugin whose node advertises a controller waits for the controller before publishing', async () => {
    h.registry.register({ type: 'csi-node', name: PLUGIN, allocId: 'plugin-alloc', socketPath: SOCKET });
    h.csi.set(nodeInfo({ controllerService: true }));
    await h.catalog.registerVolume(spec());
    const claim = h.catalog.claim(req('a1'));
    await h.clock.advance(0);
    expect(h.csi.pendingWaits).toBe(1);
    h.registry.register({ type: 'csi-controller', name: PLUGIN, allocId: 'plugin-alloc', socketPath: SOCKET });
    h.csi.set(controllerInfo({ publish: true }));
    await expect(claim).resolves.toMatchObject({ publishContext: { devicePath: '/dev/fake0' } });
    expect(h.csi.waits).toEqual([{ type: 'csi-controller', name: 'hp', phase: 'prerun' }]);
  });

  test('a controller that does not come is a retryable refusal', async () => {
    h.registry.register({ type: 'csi-node', name: PLUGIN, allocId: 'plugin-alloc', socketPath: SOCKET });
    h.csi.set(nodeInfo({ controllerService: true }));
    h.csi.unavailable.add('csi-controller');
    await h.catalog.registerVolume(spec());
    const err = await refused(h.catalog.claim(req('a1')));
    expect(err.retryable).toBe(true);
    expect(err.message).toContain('controller plugin "hp"');
  });

  test('unpublish: NOT_FOUND counts as done; another failure keeps the claim; a missing controller too', async () => {
    h.plugin({ publish: true });
    await h.catalog.registerVolume(spec({ capabilities: [{ accessMode: 'multi-node-multi-writer', attachmentMode: 'file-system' }] }));
    for (const a of ['a1', 'a2', 'a3']) await h.catalog.claim(req(a, { accessMode: 'multi-node-multi-writer' }));

    h.controller.failures.set('ControllerUnpublishVolume', csiError(GrpcStatus.NOT_FOUND, 'ControllerUnpublishVolume'));
    await h.catalog.release('data', 'a1');

    h.controller.failures.set('ControllerUnpublishVolume', csiError(GrpcStatus.INTERNAL, 'ControllerUnpublishVolume'));
    await expect(h.catalog.release('data', 'a2')).rejects.toBeInstanceOf(VolumePluginError);
    await expect(h.catalog.release('data', 'a2')).rejects.toThrow(
      /could not unpublish volume "data" from node storage-node-1 for alloc a2/,
    );
    expect(h.catalog.getVolume('data')?.claims.map((c) => c.allocId)).toEqual(['a2', 'a3']);

    h.controller.failures.clear();
    h.registry.deregister('csi-controller', PLUGIN, 'plugin-alloc');
    await expect(h.catalog.release('data', 'a3')).rejects.toThrow(/controller plugin "hp" is not running/);
    expect(h.catalog.getVolume('data')?.publishContexts).toEqual({ a2: { devicePath: '/dev/fake0' }, a3: { devicePath: '/dev/fake0' } });
    expect(h.catalog.getVolume('data')?.claims.map((c) => c.allocId)).toEqual(['a2', 'a3']);
  });
});

// ---- create / delete ----------------------------------------------------------------------

describe('create and delete through the controller', () => {
  const createSpec = (over: Partial<VolumeSpec> = {}): VolumeSpec => {
    const s = spec({
      name: 'Data volume',
      capacityMin: 1024 * 1024,
      capacityMax: 2 * 1024 * 1024,
      parameters: { tier: 'fast' },
      context: { name: 'mine', zone: 'a' },
      ...over,
    });
    delete s.externalId;
    return s;
  };

  test("CreateVolume with the spec; the plugin's id, capacity and context are stored", async () => {
    h.plugin();
    const view = await h.catalog.createVolume(
      createSpec({
        capabilities: [
          { accessMode: 'single-node-writer', attachmentMode: 'file-system' },
          { accessMode: 'multi-node-reader-only', attachmentMode: 'block-device' },
        ],
      }),
    );
    expect(h.requestsOf('CreateVolume')).toEqual([
      {
        name: 'csiplug-data',
        capacityRange: { requiredBytes: 1024 * 1024, limitBytes: 2 * 1024 * 1024 },
        volumeCapabilities: [
          { mount: { fsType: '', mountFlags: [], volumeMountGroup: '' }, accessMode: { mode: 'SINGLE_NODE_WRITER' } },
          { block: {}, accessMode: { mode: 'MULTI_NODE_READER_ONLY' } },
        ],
        parameters: { tier: 'fast' },
        secrets: { token: 's3cret' },
      },
    ]);
    // The plugin's volume context is laid over the spec's: its "name" wins, the spec's "zone" stays.
    expect(view).toMatchObject({
      id: 'data',
      name: 'Data volume',
      externalId: CREATED_ID,
      capacityBytes: 1024 * 1024,
      context: { name: 'csiplug-data', zone: 'a' },
      schedulable: true,
    });
    expect(h.catalog.getVolume('data')).toEqual(view);
    expect(h.events).toEqual([{ volumeId: 'data', kind: 'created', message: expect.stringContaining(CREATED_ID) }]);
    expect(h.csi.waits).toEqual([{ type: 'csi-controller', name: 'hp', phase: 'prerun' }]);
    expect(h.controllers.clients.length).toBeGreaterThan(0);
    expect(h.openControllerClients()).toBe(0);
  });

  test('waits for the controller plugin to come up', async () => {
    const created = h.catalog.createVolume(createSpec());
    await h.clock.advance(0);
    expect(h.csi.pendingWaits).toBe(1);
    h.plugin();
    await expect(created).resolves.toMatchObject({ externalId: CREATED_ID });
  });

  test('refuses: no controller, a controller without CREATE_DELETE_VOLUME, an external id, a taken id, a failing plugin', async () => {
    h.csi.unavailable.add('csi-controller');
    await expect(h.catalog.createVolume(createSpec())).rejects.toThrow(/controller plugin "hp" is not available/);

    h.plugin({ createDelete: false });
    await expect(h.catalog.createVolume(createSpec())).rejects.toThrow(
      /does not offer CREATE_DELETE_VOLUME; create the volume on the storage side/,
    );
    await expect(h.catalog.createVolume(spec())).rejects.toThrow(/external_id names an existing volume/);

    h.plugin();
    await h.catalog.registerVolume(spec());
    await expect(h.catalog.createVolume(createSpec())).rejects.toBeInstanceOf(VolumeExistsError);

    h.controller.failures.set('CreateVolume', csiError(GrpcStatus.RESOURCE_EXHAUSTED, 'CreateVolume', 'disk full'));
    await expect(h.catalog.createVolume(createSpec({ id: 'other' }))).rejects.toThrow(
      /could not create volume "other" on plugin "hp".*disk full/,
    );
    expect(h.requestsOf('CreateVolume')).toHaveLength(1);
    expect(h.catalog.listVolumes().map((v) => v.id)).toEqual(['data']);
  });

  test('the CSI name comes from the id, with or without a display name; no capacity range when none is given', async () => {
    h.plugin();
    const s = createSpec({ capacityMin: undefined, capacityMax: undefined });
    delete s.capacityMin;
    delete s.capacityMax;
    await h.catalog.createVolume({ ...s, name: '' });
    await h.catalog.createVolume({ ...s, id: 'Data.2', name: 'Data volume' });
    const sent = h.requestsOf('CreateVolume');
    expect(sent.map((r) => r.name)).toEqual(['csiplug-data', csiVolumeName('Data.2')]);
    expect(sent[0]!.capacityRange).toBeUndefined();
  });

  test('two volumes with one display name get two CSI names, so two storages: deleting the second leaves the first', async () => {
    h.plugin();
    h.controller.volumes = new Set();
    const first = await h.catalog.createVolume(createSpec({ id: 'first', name: 'shared' }));
    const second = await h.catalog.createVolume(createSpec({ id: 'second', name: 'shared' }));
    expect(h.requestsOf('CreateVolume').map((r) => r.name)).toEqual(['csiplug-first', 'csiplug-second']);
    expect(first.externalId).not.toBe(second.externalId);
    await h.catalog.deleteVolume('second');
    expect(h.requestsOf('DeleteVolume')).toEqual([{ volumeId: second.externalId, secrets: { token: 's3cret' } }]);
    expect(h.controller.hasVolume(first.externalId)).toBe(true);
    expect(h.catalog.getVolume('first')).toMatchObject({ externalId: first.externalId });
  });

  test('a plugin that answers CreateVolume with a volume the catalog has under another id: refused with a 409 naming it, and that volume is not deleted', async () => {
    h.plugin();
    // A volume created before CSI names came from ids, whose name was "csiplug-data".
    await h.catalog.registerVolume(spec({ id: 'old', externalId: CREATED_ID }));
    const err = await h.catalog.createVolume(createSpec()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(VolumeExternalIdInUseError);
    expect(err).toMatchObject({ code: 'EVOLUME_EXTERNAL_ID_IN_USE', holderId: 'old' });
    expect((err as Error).message).toBe(
      `volume "data": plugin "hp" volume "${CREATED_ID}" is volume "old" already; use volume "old", or deregister it first`,
    );
    expect(h.requestsOf('DeleteVolume')).toEqual([]);
    expect(h.catalog.listVolumes().map((v) => v.id)).toEqual(['old']);
  });

  test("volume delete -secret: the call's secrets go over the volume's (the call's win on a shared key)", async () => {
    h.plugin();
    await h.catalog.createVolume(createSpec());
    await h.catalog.deleteVolume('data', { secrets: { token: 'per-call', userID: 'admin' } });
    expect(h.requestsOf('DeleteVolume')).toEqual([{ volumeId: CREATED_ID, secrets: { token: 'per-call', userID: 'admin' } }]);
  });

  test('DeleteVolume with the external id and secrets, then the volume is gone', async () => {
    h.plugin();
    await h.catalog.createVolume(createSpec());
    await h.catalog.deleteVolume('data');
    expect(h.requestsOf('DeleteVolume')).toEqual([{ volumeId: CREATED_ID, secrets: { token: 's3cret' } }]);
    expect(h.catalog.getVolume('data')).toBeUndefined();
    expect(h.events.map((e) => e.kind)).toEqual(['created', 'deleted']);
    await expect(h.catalog.deleteVolume('data')).rejects.toBeInstanceOf(VolumeNotFoundError);
  });

  test('delete: refused while claimed; NOT_FOUND means gone already; other failures keep the volume', async () => {
    h.plugin();
    await h.catalog.registerVolume(spec());
    await h.catalog.claim(req('a1'));
    await expect(h.catalog.deleteVolume('data')).rejects.toBeInstanceOf(VolumeInUseError);
    expect(h.requestsOf('DeleteVolume')).toHaveLength(0);
    await h.catalog.release('data', 'a1');

    h.controller.failures.set('DeleteVolume', csiError(GrpcStatus.FAILED_PRECONDITION, 'DeleteVolume', 'still mounted'));
    await expect(h.catalog.deleteVolume('data')).rejects.toThrow(/could not delete volume "data".*still mounted/);
    expect(h.catalog.getVolume('data')).toBeDefined();

    h.controller.failures.set('DeleteVolume', csiError(GrpcStatus.NOT_FOUND, 'DeleteVolume'));
    await h.catalog.deleteVolume('data');
    expect(h.catalog.getVolume('data')).toBeUndefined();
  });

  test('delete needs a controller that can delete', async () => {
    h.plugin({ createDelete: false });
    await h.catalog.registerVolume(spec());
    await expect(h.catalog.deleteVolume('data')).rejects.toThrow(
      /does not offer CREATE_DELETE_VOLUME; delete the volume on the storage side, then "csiplug volume deregister data"/,
    );
    expect(h.catalog.getVolume('data')).toBeDefined();
  });
});

// ---- registration ---------------------------------------------------------------------------

describe('registerVolumeCatalog', () => {
  function bindDeps(c: typeof rootContainer): void {
    registerCore(c, { clock: h.clock, logger: h.logger });
    c.register(IClientStateDB, { useValue: h.state });
    bindStateStores(c); // the narrow store tokens, over the state bound above
    c.register(ICSIManager, { useValue: h.csi });
    c.register(IPluginRegistry, { useValue: h.registry });
    c.register(IVolumeSpecValidator, { useValue: h.specCheck.validator });
  }

  test('IVolumeCatalog and IVolumeClaimer resolve to one instance', () => {
    const c = rootContainer.createChildContainer();
    bindDeps(c);
    registerVolumeCatalog(c);
    const catalog = c.resolve<IVolumeCatalog>(IVolumeCatalog);
    expect(catalog).toBeInstanceOf(VolumeCatalog);
    expect(c.resolve<VolumeClaimer>(IVolumeClaimer)).toBe(catalog);
    expect(c.resolve<IVolumeCatalog>(IVolumeCatalog)).toBe(catalog);
  });

  test('the bound spec check is the one the catalog uses', async () => {
    const c = rootContainer.createChildContainer();
    bindDeps(c);
    registerVolumeCatalog(c);
    await c.resolve<IVolumeCatalog>(IVolumeCatalog).registerVolume(spec({ id: 'checked' }));
    expect(h.specCheck.seen).toEqual([spec({ id: 'checked' })]);
  });

  test('without an IVolumeSpecValidator neither token resolves, and the error says what is missing and what to do', () => {
    const c = rootContainer.createChildContainer();
    registerCore(c, { clock: h.clock, logger: h.logger });
    c.register(IClientStateDB, { useValue: h.state });
    bindStateStores(c); // the narrow store tokens, over the state bound above
    c.register(ICSIManager, { useValue: h.csi });
    c.register(IPluginRegistry, { useValue: h.registry });
    registerVolumeCatalog(c);
    expect(() => c.resolve(IVolumeCatalog)).toThrow(VolumeSpecValidatorMissingError);
    expect(() => c.resolve(IVolumeCatalog)).toThrow(/has no volume spec check: .*run an agent built with it/);
    expect(() => c.resolve(IVolumeClaimer)).toThrow(VolumeSpecValidatorMissingError);
  });

  test('a claimer bound first is kept', () => {
    const c = rootContainer.createChildContainer();
    bindDeps(c);
    const mine: VolumeClaimer = { lookup: jest.fn(), claim: jest.fn(), release: jest.fn() };
    bind(c, IVolumeClaimer, { useValue: mine });
    registerVolumeCatalog(c);
    expect(c.resolve(IVolumeClaimer)).toBe(mine);
    expect(c.resolve<IVolumeCatalog>(IVolumeCatalog)).toBeInstanceOf(VolumeCatalog);
  });
});

// ---- placement, validation, expansion, snapshots, listing ---------------------------------

describe('placement facts enforced at claim time', () => {
  test("a node outside the volume's topology is refused, naming both; inside it, the claim is granted", async () => {
    h.plugin();
    h.facts({ topology: { rack: 'r2', zone: 'z1' } });
    await h.catalog.registerVolume(spec({ topologyRequest: { required: [{ segments: { rack: 'r1' } }] } }));
    expect(h.catalog.getVolume('data')!.accessibleTopology).toEqual([{ segments: { rack: 'r1' } }]);
    const err = await refused(h.catalog.claim(req('a1')));
    expect(err.retryable).toBe(false);
    expect(err.message).toBe(
      'volume "data" is accessible from topology {rack=r1} only; node storage-node-1 of plugin "hp" has topology {rack=r2, zone=z1}: alloc a1 cannot claim it here',
    );
    expect(h.catalog.getVolume('data')!.claims).toEqual([]);
    h.facts({ topology: { rack: 'r1', zone: 'z1' } });
    await h.catalog.claim(req('a1'));
    expect(h.catalog.getVolume('data')!.claims.map((c) => c.allocId)).toEqual(['a1']);
  });

  test('max_volumes_per_node: a claim past the limit is refused with the count and the limit; a volume already held counts once', async () => {
    h.plugin();
    h.facts({ maxVolumes: 1 });
    const multiWriter = [{ accessMode: 'multi-node-multi-writer', attachmentMode: 'file-system' }] as const;
    await h.catalog.registerVolume(spec({ capabilities: [...multiWriter] }));
    await h.catalog.registerVolume(spec({ id: 'other', name: 'other', externalId: 'ext-other', capabilities: [...multiWriter] }));
    await h.catalog.claim(req('a1', { accessMode: 'multi-node-multi-writer' }));
    // The same volume again for another alloc is not a second volume on the node: granted at the limit.
    await h.catalog.claim(req('a2', { accessMode: 'multi-node-multi-writer' }));
    expect(h.catalog.getVolume('data')!.claims.map((c) => c.allocId)).toEqual(['a1', 'a2']);
    const err = await refused(h.catalog.claim(req('a3', { volumeId: 'other', accessMode: 'multi-node-multi-writer' })));
    expect(err.message).toBe(
      'node storage-node-1 holds 1 volume of plugin "hp" and its limit (max_volumes_per_node) is 1: alloc a3 cannot claim volume "other" here',
    );
    await h.catalog.release('data', 'a1');
    // a2 still holds the volume on the node.
    await refused(h.catalog.claim(req('a3', { volumeId: 'other', accessMode: 'multi-node-multi-writer' })));
    await h.catalog.release('data', 'a2');
    await h.catalog.claim(req('a3', { volumeId: 'other', accessMode: 'multi-node-multi-writer' }));
    expect(h.catalog.getVolume('other')!.claims.map((c) => c.allocId)).toEqual(['a3']);
  });
});

describe('register checks the volume with the plugin', () => {
  test('ValidateVolumeCapabilities: a refusal or an unknown external id refuses the register and stores nothing', async () => {
    h.plugin();
    h.controller.answers.set('ValidateVolumeCapabilities', () => ({ message: 'block access is not supported' }));
    await expect(h.catalog.registerVolume(spec())).rejects.toThrow(
      'volume "data": plugin "hp" cannot serve it as asked (single-node-writer/file-system): block access is not supported',
    );
    h.controller.answers.delete('ValidateVolumeCapabilities');
    h.controller.volumes = new Set(['ext-other']);
    await expect(h.catalog.registerVolume(spec())).rejects.toThrow(
      'volume "data": plugin "hp" has no volume with external_id "ext-data" (ValidateVolumeCapabilities: NOT_FOUND)',
    );
    expect(h.catalog.listVolumes()).toEqual([]);
    h.controller.volumes.add('ext-data');
    await h.catalog.registerVolume(spec());
    expect(h.requestsOf('ValidateVolumeCapabilities').at(-1)).toMatchObject({ volumeId: 'ext-data', volumeContext: { zone: 'a' } });
  });

  test('a plugin that refuses the check refuses the register; one that cannot answer now does not block it', async () => {
    h.plugin();
    h.controller.failNext(
      'ValidateVolumeCapabilities',
      csiError(GrpcStatus.INVALID_ARGUMENT, 'ValidateVolumeCapabilities', 'volume_context key "zone" is not known'),
    );
    await expect(h.catalog.registerVolume(spec())).rejects.toThrow(
      /volume "data": plugin "hp" refused to check it: .*volume_context key "zone" is not known/,
    );
    expect(h.catalog.listVolumes()).toEqual([]);
    h.controller.failNext('ValidateVolumeCapabilities', csiError(GrpcStatus.UNAVAILABLE, 'ValidateVolumeCapabilities', 'restarting'));
    await h.catalog.registerVolume(spec());
    expect(h.logger.find('could not check a volume with its plugin before registering it; registered as given')).toHaveLength(1);
  });

  test('snapshot_id and clone_id are for create only', async () => {
    await expect(h.catalog.registerVolume(spec({ snapshotId: 'snap-1' }))).rejects.toThrow(/snapshot_id is for "csiplug volume create"/);
  });
});

describe('expansion', () => {
  test('through ControllerExpandVolume: the new capacity is recorded; a smaller one is refused and nothing changes; the same one is a no-op', async () => {
    h.plugin();
    h.facts({}, { supportsExpand: true });
    await h.catalog.registerVolume(spec({ capacityMin: 1000 }));
    h.controller.answers.set('ControllerExpandVolume', (r) => ({
      capacityBytes: String((r.capacityRange as { requiredBytes: number }).requiredBytes),
      nodeExpansionRequired: true,
    }));
    const grown = await h.catalog.expandVolume('data', { capacityMin: 5000 });
    expect(grown).toMatchObject({ capacityBytes: 5000, nodeExpansionRequired: true, volume: { capacityBytes: 5000, capacityMin: 5000 } });
    expect(h.requestsOf('ControllerExpandVolume')[0]).toMatchObject({
      volumeId: 'ext-data',
      capacityRange: { requiredBytes: 5000, limitBytes: 0 },
    });
    expect(h.events.at(-1)).toMatchObject({
      kind: 'expanded',
      message: 'volume "data" expanded from 1000 to 5000 bytes by plugin hp; its node plugin expands it where it is mounted',
    });
    await expect(h.catalog.expandVolume('data', { capacityMax: 4000 })).rejects.toThrow(
      'volume "data" has 5000 bytes; capacity_max 4000 would shrink it: volumes only grow (create a new, smaller volume and copy the data)',
    );
    // capacity_min is a floor: at or below the capacity nothing grows, but a node-side expansion still owed is asked for again.
    expect(await h.catalog.expandVolume('data', { capacityMin: 4000 })).toMatchObject({ capacityBytes: 5000, nodeExpansionRequired: true });
    expect(h.requestsOf('ControllerExpandVolume')).toHaveLength(1);
    expect(h.catalog.getVolume('data')!.capacityBytes).toBe(5000);
    // Every mount of the volume expands on the node after its publish.
    expect((await h.catalog.claim(req('a1'))).volume.nodeExpandTo).toBe(5000);
  });

  test('nothing to grow and nothing owed is a VolumeUnchangedError; a claimed volume of a plugin that does not expand ONLINE is refused until it is unpublished', async () => {
    h.plugin();
    h.facts({}, { supportsExpand: true });
    await h.catalog.registerVolume(spec({ capacityMin: 1000 }));
    h.controller.answers.set('ControllerExpandVolume', () => ({ capacityBytes: '2000', nodeExpansionRequired: false }));
    await expect(h.catalog.expandVolume('data', { capacityMin: 1000 })).rejects.toThrow(
      'volume "data" exists with 1000 bytes already: nothing to change (a capacity_min above that expands it)',
    );
    await h.catalog.claim(req('a1'));
    await expect(h.catalog.expandVolume('data', { capacityMin: 2000 })).rejects.toThrow(
      'volume "data" is claimed by alloc a1; stop it before you expand the volume',
    );
    expect(h.requestsOf('ControllerExpandVolume')).toEqual([]);
    const n = h.csi.pluginInfo('csi-node', PLUGIN)!;
    h.csi.set({ ...n, pluginCapabilities: { ...n.pluginCapabilities!, onlineExpansion: true } });
    expect(await h.catalog.expandVolume('data', { capacityMin: 2000 })).toMatchObject({
      capacityBytes: 2000,
      nodeExpansionRequired: false,
    });
  });

  test('a plugin that expands on neither side is refused with what is missing; a plugin failure keeps the old capacity', async () => {
    h.plugin();
    await h.catalog.registerVolume(spec({ capacityMin: 1000 }));
    await expect(h.catalog.expandVolume('data', { capacityMin: 2000 })).rejects.toThrow(
      'cannot expand volume "data": plugin "hp" offers EXPAND_VOLUME on neither its controller nor its node side',
    );
    h.facts({}, { supportsExpand: true });
    h.controller.failures.set('ControllerExpandVolume', csiError(GrpcStatus.OUT_OF_RANGE, 'ControllerExpandVolume', 'too big'));
    await expect(h.catalog.expandVolume('data', { capacityMin: 2000 })).rejects.toThrow(
      /could not expand volume "data" \(external id ext-data\) to 2000 bytes on plugin "hp": .*too big/,
    );
    expect(h.catalog.getVolume('data')!.capacityMin).toBe(1000);
    await expect(h.catalog.expandVolume('nope', { capacityMin: 2000 })).rejects.toBeInstanceOf(VolumeNotFoundError);
  });
});

describe('snapshots and what the plugin holds', () => {
  test('create, list (one page at a time, with the catalog id of the source), delete', async () => {
    h.plugin();
    h.facts({}, { supportsSnapshots: true, supportsListVolumes: true, capabilities: { listSnapshots: true } as never });
    await h.catalog.registerVolume(spec());
    h.controller.answers.set('CreateSnapshot', (r) => ({
      snapshot: {
        snapshotId: `snap-${String(r.name)}`,
        sourceVolumeId: r.sourceVolumeId,
        sizeBytes: '42',
        creationTime: { seconds: '1700000000', nanos: 5e8 },
        readyToUse: true,
      },
    }));
    const snap = await h.catalog.createSnapshot('data', 'nightly');
    expect(snap).toEqual({
      pluginId: PLUGIN,
      id: 'snap-nightly',
      externalSourceVolumeId: 'ext-data',
      sourceVolumeId: 'data',
      sizeBytes: 42,
      createTime: 1700000000500,
      ready: true,
    });
    expect(h.events.at(-1)).toMatchObject({ volumeId: 'data', kind: 'snapshot-created' });
    h.controller.answers.set('ListSnapshots', (r) =>
      r.startingToken
        ? { entries: [{ snapshot: { snapshotId: 's2', sourceVolumeId: 'ext-gone', sizeBytes: '1', readyToUse: false } }], nextToken: '' }
        : { entries: [{ snapshot: { snapshotId: 's1', sourceVolumeId: 'ext-data', sizeBytes: '7', readyToUse: true } }], nextToken: '1' },
    );
    const first = await h.catalog.listSnapshots(PLUGIN, { perPage: 1 });
    expect(first).toEqual({ items: [expect.objectContaining({ id: 's1', sourceVolumeId: 'data' })], nextToken: '1' });
    const second = await h.catalog.listSnapshots(PLUGIN, { perPage: 1, nextToken: first.nextToken });
    expect(second.items).toEqual([{ pluginId: PLUGIN, id: 's2', externalSourceVolumeId: 'ext-gone', sizeBytes: 1, ready: false }]);
    expect(second.nextToken).toBeUndefined();
    expect(h.requestsOf('ListSnapshots')[1]).toMatchObject({ maxEntries: 1, startingToken: '1' });
    await h.catalog.deleteSnapshot(PLUGIN, 'snap-nightly');
    expect(h.requestsOf('DeleteSnapshot')[0]).toMatchObject({ snapshotId: 'snap-nightly' });
  });

  test("per-call secrets and parameters reach the plugin as Nomad sends them: create's secrets over the volume's, its own parameters; delete's and list's secrets alone", async () => {
    h.plugin();
    h.facts({}, { supportsSnapshots: true, capabilities: { listSnapshots: true } as never });
    await h.catalog.registerVolume(spec({ secrets: { token: 's3cret', userKey: 'stored' } }));
    h.controller.answers.set('CreateSnapshot', (r) => ({
      snapshot: { snapshotId: `snap-${String(r.name)}`, sourceVolumeId: r.sourceVolumeId, sizeBytes: '1', readyToUse: true },
    }));
    h.controller.answers.set('ListSnapshots', () => ({ entries: [], nextToken: '' }));
    const parameters = { 'csi.storage.k8s.io/snapshotter-secret-name': 'csi-rbd-secret', clusterID: 'ceph-1' };
    await h.catalog.createSnapshot('data', 'nightly', { secrets: { userID: 'admin', userKey: 'per-call' }, parameters });
    expect(h.requestsOf('CreateSnapshot')[0]).toMatchObject({
      sourceVolumeId: 'ext-data',
      name: 'nightly',
      secrets: { token: 's3cret', userID: 'admin', userKey: 'per-call' },
      parameters,
    });
    // The volume's own secrets are not changed by a call's.
    expect(h.catalog.getVolume('data')!.secrets).toEqual({ token: 's3cret', userKey: 'stored' });
    await h.catalog.listSnapshots(PLUGIN, { secrets: { userID: 'lister' } });
    expect(h.requestsOf('ListSnapshots')[0]).toMatchObject({ secrets: { userID: 'lister' } });
    await h.catalog.deleteSnapshot(PLUGIN, 'snap-nightly', { secrets: { userID: 'deleter' } });
    expect(h.requestsOf('DeleteSnapshot')[0]).toEqual({ snapshotId: 'snap-nightly', secrets: { userID: 'deleter' } });
  });

  test('a plugin that does not list snapshots (LIST_SNAPSHOTS not offered, or answered UNIMPLEMENTED) is an error naming it, never an empty list', async () => {
    h.plugin();
    h.facts({}, { supportsSnapshots: true });
    await expect(h.catalog.listSnapshots(PLUGIN)).rejects.toThrow(
      'plugin "hp" does not list snapshots (its controller does not offer LIST_SNAPSHOTS); the snapshots it holds cannot be shown here: see them on the storage system itself',
    );
    h.facts({}, { capabilities: { listSnapshots: true } as never });
    h.controller.failures.set('ListSnapshots', csiError(GrpcStatus.UNIMPLEMENTED, 'ListSnapshots'));
    const err = await h.catalog.listSnapshots(PLUGIN).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'EVOLUME_UNSUPPORTED', pluginId: PLUGIN });
    expect((err as Error).message).toBe(
      'plugin "hp" does not list snapshots (its controller answered the list with UNIMPLEMENTED); the snapshots it holds cannot be shown here: see them on the storage system itself',
    );
  });

  test('a CreateSnapshot that does not answer holds no claim or release of its volume; a delete waits for it, holding no claim meanwhile', async () => {
    h.plugin({ publish: true });
    h.facts({}, { supportsSnapshots: true });
    await h.catalog.registerVolume(spec());
    await h.catalog.claim(req('a1'));
    h.controller.answers.set('CreateSnapshot', (r) => ({
      snapshot: { snapshotId: `snap-${String(r.name)}`, sourceVolumeId: r.sourceVolumeId, sizeBytes: '1', readyToUse: true },
    }));
    const hung = h.controller.gate('CreateSnapshot');
    let snapshotDone = false;
    const snapshot = h.catalog.createSnapshot('data', 'nightly').finally(() => (snapshotDone = true));
    await hung.reached;
    // The claim's release (job stop) and a new claim go through while the snapshot call hangs.
    expect(await settles(h.catalog.release('data', 'a1'))).toBe(true);
    expect(h.requestsOf('ControllerUnpublishVolume')).toHaveLength(1);
    await h.catalog.claim(req('a2'));
    await h.catalog.release('data', 'a2');
    expect(snapshotDone).toBe(false);
    // A delete would take the volume from under the snapshot: it waits for it, and a claim meanwhile is not held behind the delete.
    let deleted = false;
    const deleting = h.catalog.deleteVolume('data').then(() => (deleted = true));
    await h.catalog.claim(req('a3'));
    await h.catalog.release('data', 'a3');
    expect(deleted).toBe(false);
    expect(h.requestsOf('DeleteVolume')).toEqual([]);
    hung.release();
    await expect(snapshot).resolves.toMatchObject({ externalSourceVolumeId: 'ext-data' });
    await deleting;
    expect(h.requestsOf('DeleteVolume')).toHaveLength(1);
    expect(h.catalog.getVolume('data')).toBeUndefined();
  });

  test('a plugin without the capability, no controller, an unknown volume: each a clear error, nothing asked of the plugin', async () => {
    h.plugin();
    await h.catalog.registerVolume(spec());
    await expect(h.catalog.createSnapshot('data', 'x')).rejects.toThrow(
      'cannot snapshot volume "data": the controller of plugin "hp" does not offer CREATE_DELETE_SNAPSHOT',
    );
    await expect(h.catalog.listSnapshots(PLUGIN)).rejects.toThrow(
      'plugin "hp" does not list snapshots (its controller does not offer LIST_SNAPSHOTS)',
    );
    await expect(h.catalog.createSnapshot('nope', 'x')).rejects.toBeInstanceOf(VolumeNotFoundError);
    await expect(h.catalog.listExternalVolumes('other-plugin')).rejects.toThrow(
      'cannot list its volumes: no controller of plugin "other-plugin" is registered on this node',
    );
    await expect(h.catalog.createVolume(spec({ externalId: undefined, id: 'restored', snapshotId: 'snap-1' }))).rejects.toThrow(
      'cannot restore snapshot "snap-1" into volume "restored": the controller of plugin "hp" does not offer CREATE_DELETE_SNAPSHOT',
    );
    await expect(h.catalog.createVolume(spec({ externalId: undefined, id: 'copy', cloneId: 'ext-data' }))).rejects.toThrow(
      'cannot clone volume "ext-data" into volume "copy": the controller of plugin "hp" does not offer CLONE_VOLUME',
    );
    expect(h.controller.calls.map((c) => c.method)).toEqual(['ValidateVolumeCapabilities']);
  });

  test('create from a snapshot or a clone sends the content source and the topology request, and keeps the accessible topology', async () => {
    h.plugin();
    h.facts({}, { supportsSnapshots: true, supportsClone: true });
    h.controller.volumes = new Set();
    h.controller.answers.set('CreateVolume', (r) => ({
      volume: { volumeId: `ext-${String(r.name)}`, capacityBytes: '10', accessibleTopology: [{ segments: { rack: 'r1' } }] },
    }));
    const v = await h.catalog.createVolume(
      spec({
        externalId: undefined,
        id: 'restored',
        name: 'restored',
        snapshotId: 'snap-1',
        topologyRequest: { required: [{ segments: { rack: 'r1' } }], preferred: [{ segments: { rack: 'r1' } }] },
      }),
    );
    expect(v.accessibleTopology).toEqual([{ segments: { rack: 'r1' } }]);
    expect(h.requestsOf('CreateVolume')[0]).toMatchObject({
      volumeContentSource: { snapshot: { snapshotId: 'snap-1' } },
      accessibilityRequirements: { requisite: [{ segments: { rack: 'r1' } }], preferred: [{ segments: { rack: 'r1' } }] },
    });
    await h.catalog.createVolume(spec({ externalId: undefined, id: 'copy', name: 'copy', cloneId: 'ext-csiplug-restored' }));
    expect(h.requestsOf('CreateVolume')[1]).toMatchObject({ volumeContentSource: { volume: { volumeId: 'ext-csiplug-restored' } } });
    await expect(h.catalog.createVolume(spec({ externalId: undefined, id: 'both', snapshotId: 's', cloneId: 'c' }))).rejects.toThrow(
      'volume "both": snapshot_id and clone_id are two sources; give at most one',
    );
  });

  test('listExternalVolumes: one page, marking the volumes the catalog has', async () => {
    h.plugin();
    h.facts({}, { supportsListVolumes: true });
    await h.catalog.registerVolume(spec());
    h.controller.answers.set('ListVolumes', () => ({
      entries: [
        {
          volume: { volumeId: 'ext-data', capacityBytes: '100' },
          status: { publishedNodeIds: ['storage-node-1'], volumeCondition: { abnormal: false, message: 'fine' } },
        },
        { volume: { volumeId: 'ext-stray', capacityBytes: '0', accessibleTopology: [{ segments: { rack: 'r1' } }] }, status: null },
      ],
      nextToken: '2',
    }));
    const page = await h.catalog.listExternalVolumes(PLUGIN, { perPage: 2 });
    expect(page).toEqual({
      items: [
        {
          pluginId: PLUGIN,
          externalId: 'ext-data',
          capacityBytes: 100,
          publishedNodeIds: ['storage-node-1'],
          condition: { abnormal: false, message: 'fine' },
          volumeId: 'data',
        },
        { pluginId: PLUGIN, externalId: 'ext-stray', accessibleTopology: [{ segments: { rack: 'r1' } }] },
      ],
      nextToken: '2',
    });
    expect(h.requestsOf('ListVolumes')[0]).toMatchObject({ maxEntries: 2, startingToken: '' });
    await expect(h.catalog.listExternalVolumes(PLUGIN, { perPage: -1 })).rejects.toThrow(
      'per_page must be a whole number of 0 or more, got -1',
    );
  });
});
