// The routed controller (cluster-controllers.ts): where route() sends a call
// and when it tries the next node, what each failure becomes for the CSI
// caller; which plugins get a routed controller here, its socket and its
// registration; and answerRoutedCall on this node's own controller. The
// HTTP hop to another agent and the node records are fakes; the registry,
// the unix sockets and the plugins' gRPC servers are real.
import type { ClusterNodeView, NodePluginInfo } from '../node-registry';
import { DefaultTimeoutPolicy, MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { CSIStatusError, GrpcInvoker, GrpcStatus, serveCsi, type CsiServer, type CsiServerHandlers } from '@csiplug/csi';
import { PLUGIN_OPTION_PLUGIN_TYPE } from '@csiplug/csimanager';
import { DynamicPluginRegistry, PluginDispenserTable } from '@csiplug/registry';
import { FakeRegistryStore } from '@csiplug/registry/testing';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { ApiError, ApiErrorCode } from '@csiplug/api';
import {
  ControllerRouter,
  ROUTED_CONTROLLER_PREFIX,
  RoutedControllerUnavailableError,
  answerRoutedCall,
  isRoutedController,
  rpcsOf,
  type RoutedCaller,
  type RoutedService,
} from './cluster-controllers';
import type { RoutedAnswer } from '@csiplug/api';

const PLUGIN = 'hp';
const SELF = 'self';
const ROUTED = ROUTED_CONTROLLER_PREFIX + PLUGIN;

/** A node record as the cluster lists it: ready, with a healthy controller of PLUGIN unless told otherwise. */
function node(name: string, over: Partial<ClusterNodeView> = {}): ClusterNodeView {
  return {
    name,
    nodeClass: '',
    meta: {},
    drivers: ['raw_exec'],
    plugins: [{ id: PLUGIN, type: 'csi-controller', healthy: true }],
    address: `http://${name}.cluster:4646`,
    version: '0.1.0',
    registeredAt: 0,
    updatedAt: 0,
    status: 'ready',
    ...over,
  };
}
const controllerOf = (id: string, healthy = true): NodePluginInfo => ({ id, type: 'csi-controller', healthy });
const nodePluginOf = (id: string): NodePluginInfo => ({ id, type: 'csi-node', healthy: true });

// What the other agent's API client throws, as ApiClient words it.
const refused = (name: string, code = 'ECONNREFUSED') =>
  new ApiError(
    0,
    ApiErrorCode.Connect,
    `cannot reach the csiplug agent at http://${name}.cluster:4646: connect ${code} 10.0.0.9:4646; is it running? (set -address or CSIPLUG_ADDR)`,
  );
const notThere = (name: string) =>
  new ApiError(503, 'EPLUGIN_UNAVAILABLE', `no controller of plugin "${PLUGIN}" runs on this node (${name})`);
const timedOut = (name: string) =>
  new ApiError(
    0,
    'ETIMEOUT',
    `no answer from the agent at http://${name}.cluster:4646 within 2m0s (POST /v1/cluster/csi/hp/controller/CreateVolume); it may still be working on it, timed out`,
  );

interface SentCall {
  node: string;
  token: string | undefined;
  plugin: string;
  service: RoutedService;
  rpc: string;
  request: unknown;
}

/** What a node's agent does with a routed call: answer, or throw as the API client would. */
type Behaviour = (call: SentCall, signal: AbortSignal) => RoutedAnswer | Promise<RoutedAnswer>;

/** The RoutedCaller: records each call (by node name) and answers as each node is told to; by default, a response naming the node. */
class FakeCaller {
  readonly calls: SentCall[] = [];
  private readonly behaviours = new Map<string, Behaviour>();

  readonly send: RoutedCaller = async (address, token, plugin, service, rpc, request, signal) => {
    const call: SentCall = { node: new URL(address).hostname.replace(/\.cluster$/, ''), token, plugin, service, rpc, request };
    this.calls.push(call);
    const behaviour = this.behaviours.get(call.node);
    return behaviour ? behaviour(call, signal) : { response: { answeredBy: call.node } };
  };

  /** From now on `name` answers with `behaviour` (an error is thrown). */
  on(name: string, behaviour: Behaviour | Error | RoutedAnswer): void {
    this.behaviours.set(
      name,
      typeof behaviour === 'function' ? behaviour : () => (behaviour instanceof Error ? Promise.reject(behaviour) : behaviour),
    );
  }

  /** The nodes asked, in order, since the last take. */
  take(): string[] {
    return this.calls.splice(0).map((c) => c.node);
  }
}

/** A temp data dir, a real registry over a fake store, fake node records and caller, and the router over them. */
class Harness {
  readonly dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-routed-'));
  readonly dataDir = path.join(this.dir, 'data');
  readonly clock = new FakeClock();
  readonly logger = new MemoryLogger();
  readonly store = new FakeRegistryStore();
  readonly caller = new FakeCaller();
  readonly membership: { nodeName: string; lastSeenNodes: { nodes: ClusterNodeView[]; at: number } | undefined } = {
    nodeName: SELF,
    lastSeenNodes: undefined,
  };
  /** What the CSI manager says of each plugin's serving controller instance. */
  readonly serving = new Map<string, { allocId: string; healthy: boolean }>();
  token: string | undefined = 'agents-token';
  registry = this.newRegistry();
  router = this.newRouter();
  private readonly servers: CsiServer[] = [];

  nodes(...nodes: ClusterNodeView[]): void {
    this.membership.lastSeenNodes = { nodes, at: this.clock.now() };
  }

  /** A node plugin of `name` registered here, as its plugin task would. */
  nodePluginHere(name = PLUGIN, allocId = 'alloc-node'): void {
    this.registry.register({
      type: 'csi-node',
      name,
      allocId,
      socketPath: path.join(this.dataDir, 'plugins', allocId, 'csi.sock'),
      version: '1.0.0',
    });
  }

  route(
    rpc = 'CreateVolume',
    request: unknown = { name: 'vol-1' },
    signal = new AbortController().signal,
    service: RoutedService = 'controller',
  ): Promise<unknown> {
    return this.router.route(PLUGIN, service, rpc, request, signal);
  }

  /** A plugin's own gRPC server on a temp socket, stopped when the test ends. */
  async servePlugin(name: string, handlers: CsiServerHandlers): Promise<string> {
    const socketPath = path.join(this.dir, `${name}.sock`);
    this.servers.push(await serveCsi(`unix://${socketPath}`, handlers));
    return socketPath;
  }

  /** An agent restart: the router stops, and a new registry and router come up over the same store and data dir. */
  async restart(): Promise<void> {
    await this.router.dispose();
    this.registry.dispose();
    this.registry = this.newRegistry();
    this.router = this.newRouter();
  }

  async dispose(): Promise<void> {
    await this.router.dispose();
    await Promise.all(this.servers.map((s) => s.dispose()));
    this.registry.dispose();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  private newRegistry(): DynamicPluginRegistry {
    return new DynamicPluginRegistry(this.store, this.clock, this.logger, new DefaultTimeoutPolicy(), new PluginDispenserTable(), {});
  }

  private newRouter(): ControllerRouter {
    return new ControllerRouter({
      dataDir: this.dataDir,
      registry: this.registry,
      membership: this.membership,
      servingController: (plugin) => this.serving.get(plugin),
      token: () => this.token,
      clock: this.clock,
      logger: this.logger,
      caller: this.caller.send,
    });
  }
}

/** The CSIStatusError `p` rejects with (failing the test when it resolves or rejects with something else). */
async function statusOf(p: Promise<unknown>): Promise<CSIStatusError> {
  let err: unknown;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  if (!(err instanceof CSIStatusError)) throw new Error(`expected a CSIStatusError, got ${err === undefined ? 'a result' : String(err)}`);
  return err;
}

const exists = (p: string) => fs.existsSync(p);
const isSocket = (p: string) => exists(p) && fs.statSync(p).isSocket();

let h: Harness;
beforeEach(() => {
  h = new Harness();
});
afterEach(async () => {
  await h.dispose();
});

describe('rpcsOf', () => {
  it('names the RPCs of each service from csi.proto', () => {
    expect(rpcsOf('identity')).toEqual(expect.arrayContaining(['GetPluginInfo', 'GetPluginCapabilities', 'Probe']));
    expect(rpcsOf('controller')).toEqual(
      expect.arrayContaining(['CreateVolume', 'DeleteVolume', 'ControllerPublishVolume', 'ControllerExpandVolume', 'CreateSnapshot']),
    );
    expect(rpcsOf('controller')).not.toContain('NodeStageVolume');
  });
});

describe('ControllerRouter.route', () => {
  it('sends to the ready nodes other than this one whose record has a healthy controller of the plugin, by name', async () => {
    h.nodes(
      node('zeta'),
      node(SELF),
      node('gone', { status: 'down' }),
      node('sick', { plugins: [controllerOf(PLUGIN, false)] }),
      node('elsewhere', { plugins: [controllerOf('other-plugin')] }),
      node('node-only', { plugins: [nodePluginOf(PLUGIN)] }),
      node('no-address', { address: undefined }),
      node('mid'),
      node('alpha'),
    );
    for (const n of ['alpha', 'mid', 'zeta']) h.caller.on(n, notThere(n));

    const err = await statusOf(h.route());
    expect(h.caller.take()).toEqual(['alpha', 'mid', 'zeta']);
    expect(err.grpcCode).toBe(GrpcStatus.UNAVAILABLE);
    expect(err.message).toContain(`no controller of plugin "${PLUGIN}" could be reached`);
    for (const n of ['alpha', 'mid', 'zeta'])
      expect(err.message).toContain(`${n}: no controller of plugin "${PLUGIN}" runs on this node (${n})`);
    expect(h.router.view(PLUGIN)).toEqual({});
  });

  it("hands the request, the service, the rpc and the agents' token to the caller, and gives back the response", async () => {
    h.nodes(node('alpha'));
    h.caller.on('alpha', { response: { volume: { volumeId: 'ext-1', capacityBytes: '1024' } } });

    await expect(h.route('CreateVolume', { name: 'vol-1', parameters: { k: 'v' } })).resolves.toEqual({
      volume: { volumeId: 'ext-1', capacityBytes: '1024' },
    });
    expect(h.caller.calls).toEqual([
      {
        node: 'alpha',
        token: 'agents-token',
        plugin: PLUGIN,
        service: 'controller',
        rpc: 'CreateVolume',
        request: { name: 'vol-1', parameters: { k: 'v' } },
      },
    ]);

    // The token is read at each call (a changed ACL token is used at once); none is none.
    h.caller.take();
    h.token = 'rotated';
    await h.route('GetPluginInfo', {}, undefined, 'identity');
    h.token = undefined;
    await h.route('GetPluginInfo', {}, undefined, 'identity');
    expect(h.caller.calls.map((c) => [c.token, c.service, c.rpc])).toEqual([
      ['rotated', 'identity', 'GetPluginInfo'],
      [undefined, 'identity', 'GetPluginInfo'],
    ]);
  });

  it('tries the node that answered last first, and view() names it', async () => {
    h.nodes(node('alpha'), node('beta'));
    expect(h.router.view(PLUGIN)).toEqual({});

    h.caller.on('alpha', notThere('alpha'));
    await expect(h.route()).resolves.toEqual({ answeredBy: 'beta' });
    expect(h.caller.take()).toEqual(['alpha', 'beta']);
    expect(h.router.view(PLUGIN)).toEqual({ node: 'beta' });

    // alpha answers again, but beta answered last: beta first.
    h.caller.on('alpha', { response: { answeredBy: 'alpha' } });
    await expect(h.route()).resolves.toEqual({ answeredBy: 'beta' });
    expect(h.caller.take()).toEqual(['beta']);

    h.caller.on('beta', notThere('beta'));
    await expect(h.route()).resolves.toEqual({ answeredBy: 'alpha' });
    expect(h.caller.take()).toEqual(['beta', 'alpha']);
    expect(h.router.view(PLUGIN)).toEqual({ node: 'alpha' });
    expect(h.router.view('other-plugin')).toEqual({});

    h.caller.on('beta', { response: { answeredBy: 'beta' } });
    await h.route();
    expect(h.caller.take()).toEqual(['alpha']);
  });

  it.each(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND'])(
    'skips a node that cannot be reached (%s) to the next one',
    async (code) => {
      h.nodes(node('alpha'), node('beta'));
      h.caller.on('alpha', refused('alpha', code));
      await expect(h.route()).resolves.toEqual({ answeredBy: 'beta' });
      expect(h.caller.take()).toEqual(['alpha', 'beta']);
      expect(h.router.view(PLUGIN)).toEqual({ node: 'beta' });
    },
  );

  it('tries a node that could not be reached last for 30 s, then in its place again', async () => {
    h.nodes(node('alpha'), node('beta'), node('gamma'));
    h.caller.on('alpha', refused('alpha'));
    await h.route();
    expect(h.caller.take()).toEqual(['alpha', 'beta']);

    // beta answered last; alpha, first by name, now comes after gamma.
    for (const n of ['alpha', 'beta', 'gamma']) h.caller.on(n, notThere(n));
    await statusOf(h.route());
    expect(h.caller.take()).toEqual(['beta', 'gamma', 'alpha']);

    await h.clock.advance(29_999);
    await statusOf(h.route());
    expect(h.caller.take()).toEqual(['beta', 'gamma', 'alpha']);

    await h.clock.advance(1);
    await statusOf(h.route());
    expect(h.caller.take()).toEqual(['beta', 'alpha', 'gamma']);
  });

  it('takes a node that could not be reached off the last place as soon as it answers', async () => {
    h.nodes(node('alpha'), node('beta'), node('gamma'));
    h.caller.on('alpha', refused('alpha'));
    await h.route();
    h.caller.take();

    h.caller.on('alpha', { response: { answeredBy: 'alpha' } });
    h.caller.on('beta', notThere('beta'));
    h.caller.on('gamma', notThere('gamma'));
    await expect(h.route()).resolves.toEqual({ answeredBy: 'alpha' });
    expect(h.caller.take()).toEqual(['beta', 'gamma', 'alpha']);
    expect(h.router.view(PLUGIN)).toEqual({ node: 'alpha' });

    // Well within the 30 s: alpha, the last to answer, is first.
    await h.route();
    expect(h.caller.take()).toEqual(['alpha']);
  });

  it.each([
    ['a timeout', timedOut('alpha')],
    [
      'a reset after sending',
      new ApiError(0, ApiErrorCode.Connect, 'cannot reach the csiplug agent at http://alpha.cluster:4646: socket hang up; is it running?'),
    ],
    ['a 500 of that agent', new ApiError(500, ApiErrorCode.Internal, 'the agent failed')],
    ['a 503 other than EPLUGIN_UNAVAILABLE', new ApiError(503, 'ESHUTDOWN', 'the agent is shutting down')],
    ['an error that is no ApiError', new Error('boom')],
  ])('never sends a call elsewhere after %s: UNAVAILABLE, saying it may have been made', async (_what, failure) => {
    h.nodes(node('alpha'), node('beta'));
    h.caller.on('alpha', failure);
    const err = await statusOf(h.route());
    expect(h.caller.take()).toEqual(['alpha']);
    expect(err.grpcCode).toBe(GrpcStatus.UNAVAILABLE);
    expect(err.message).toContain('CreateVolume routed to node alpha got no answer');
    expect(err.message).toContain(failure.message);
    expect(err.message).toContain('it may have been made there');
    expect(h.router.view(PLUGIN)).toEqual({});
  });

  it.each([
    [400, ApiErrorCode.Invalid],
    [403, ApiErrorCode.Forbidden],
    [404, ApiErrorCode.NotFound],
  ])('turns a %i (%s) of the other agent into INTERNAL, not sent elsewhere', async (status, code) => {
    h.nodes(node('alpha'), node('beta'));
    h.caller.on('alpha', new ApiError(status, code, 'refused by the agent'));
    const err = await statusOf(h.route());
    expect(h.caller.take()).toEqual(['alpha']);
    expect(err.grpcCode).toBe(GrpcStatus.INTERNAL);
    expect(err.message).toBe('CreateVolume routed to node alpha was refused: refused by the agent');
  });

  it("gives back the plugin's own status as a CSIStatusError, and the last node to answer stays", async () => {
    h.nodes(node('alpha'), node('beta'));
    h.caller.on('alpha', notThere('alpha'));
    await h.route();
    expect(h.router.view(PLUGIN)).toEqual({ node: 'beta' });
    h.caller.take();

    h.caller.on('beta', notThere('beta'));
    h.caller.on('alpha', { error: { code: GrpcStatus.NOT_FOUND, details: 'volume "ext-1" does not exist' } });
    const err = await statusOf(h.route('DeleteVolume', { volumeId: 'ext-1' }));
    expect(err.grpcCode).toBe(GrpcStatus.NOT_FOUND);
    expect(err.message).toBe('volume "ext-1" does not exist');
    expect(h.caller.take()).toEqual(['beta', 'alpha']);
    expect(h.router.view(PLUGIN)).toEqual({ node: 'beta' });

    // A status is the plugin's answer: it is not sent to another node.
    h.caller.on('beta', { error: { code: GrpcStatus.FAILED_PRECONDITION, details: 'volume is published' } });
    expect((await statusOf(h.route())).grpcCode).toBe(GrpcStatus.FAILED_PRECONDITION);
    expect(h.caller.take()).toEqual(['beta']);
  });

  it.each([
    ['null', null],
    ['{}', {}],
    ['a null response', { response: null }],
    ['a response that is not an object', { response: 'ok' }],
    ['an error without a code', { error: { details: 'no code' } }],
  ])('turns a malformed answer (%s) into INTERNAL, not sent elsewhere', async (_what, answer) => {
    h.nodes(node('alpha'), node('beta'));
    h.caller.on('alpha', answer as unknown as RoutedAnswer);
    const err = await statusOf(h.route());
    expect(h.caller.take()).toEqual(['alpha']);
    expect(err.grpcCode).toBe(GrpcStatus.INTERNAL);
    expect(err.message).toBe('CreateVolume routed to node alpha: its answer is not a CSI response');
    expect(h.router.view(PLUGIN)).toEqual({});
  });

  it('is UNAVAILABLE, naming the plugin, when no node can take the call', async () => {
    const expectNoTarget = async () => {
      const err = await statusOf(h.route());
      expect(err.grpcCode).toBe(GrpcStatus.UNAVAILABLE);
      expect(err.message).toBe(`no ready node of the cluster runs a healthy controller of plugin "${PLUGIN}"`);
    };
    await expectNoTarget(); // no node records read yet
    h.nodes(
      node(SELF),
      node('gone', { status: 'down' }),
      node('sick', { plugins: [controllerOf(PLUGIN, false)] }),
      node('node-only', { plugins: [nodePluginOf(PLUGIN)] }),
    );
    await expectNoTarget();
    expect(h.caller.calls).toEqual([]);
  });

  it('is CANCELLED when the caller gives up, and asks no other node', async () => {
    h.nodes(node('alpha'), node('beta'));
    let asked!: () => void;
    const askedAlpha = new Promise<void>((resolve) => (asked = resolve));
    // As ApiClient does: the call's signal aborts the request, which fails like a dropped connection.
    h.caller.on('alpha', (_call, signal) => {
      asked();
      return new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(refused('alpha')), { once: true }));
    });
    const ac = new AbortController();
    const routed = h.route('CreateVolume', { name: 'vol-1' }, ac.signal);
    await askedAlpha;
    ac.abort();
    const err = await statusOf(routed);
    expect(err.grpcCode).toBe(GrpcStatus.CANCELLED);
    expect(err.message).toBe('CreateVolume: the caller gave up while node alpha was asked');
    expect(h.caller.take()).toEqual(['alpha']);

    // Given up is not unreachable: alpha keeps its place.
    h.caller.on('alpha', notThere('alpha'));
    h.caller.on('beta', notThere('beta'));
    await statusOf(h.route());
    expect(h.caller.take()).toEqual(['alpha', 'beta']);
  });
});

describe('ControllerRouter.wantedPlugins and reconcile', () => {
  it('routes nothing for a node plugin whose controller no node has', async () => {
    h.nodePluginHere();
    h.nodes(
      node('alpha', { plugins: [nodePluginOf(PLUGIN)] }),
      node(SELF, { plugins: [nodePluginOf(PLUGIN), controllerOf(PLUGIN)] }),
      node('beta', { plugins: [controllerOf('other-plugin')] }),
    );
    expect(h.router.wantedPlugins()).toEqual(new Set());
    await h.router.reconcile();
    expect(h.registry.list('csi-controller')).toEqual([]);
    expect(exists(h.router.socketPathOf(PLUGIN))).toBe(false);
  });

  it('routes nothing for a controller elsewhere without a node plugin here', async () => {
    h.nodes(node('alpha'));
    expect(h.router.wantedPlugins()).toEqual(new Set());
    await h.router.reconcile();
    expect(h.registry.list('csi-controller')).toEqual([]);
  });

  it("serves a socket of fixed-length name and registers it as the plugin's controller while another node has one", async () => {
    const long = 'p'.repeat(200);
    h.nodePluginHere();
    h.nodePluginHere(long, 'alloc-node-long');
    // Down or unhealthy elsewhere still counts: calls wait for it to come back rather than skipping the controller.
    h.nodes(node('alpha', { status: 'down', plugins: [controllerOf(PLUGIN, false), controllerOf(long)] }));
    expect(h.router.wantedPlugins()).toEqual(new Set([PLUGIN, long]));
    await h.router.reconcile();

    for (const name of [PLUGIN, long]) {
      const socketPath = h.router.socketPathOf(name);
      expect(path.dirname(socketPath)).toBe(path.join(h.dataDir, 'cluster', 'controllers'));
      expect(path.basename(socketPath)).toMatch(/^[0-9a-f]{16}\.sock$/);
      expect(Buffer.byteLength(socketPath)).toBeLessThanOrEqual(107);
      expect(isSocket(socketPath)).toBe(true);
      const active = h.registry.get('csi-controller', name);
      expect(active).toMatchObject({
        type: 'csi-controller',
        name,
        allocId: ROUTED_CONTROLLER_PREFIX + name,
        socketPath,
        restored: false,
        options: { [PLUGIN_OPTION_PLUGIN_TYPE]: 'controller' },
      });
      expect(isRoutedController(active!.allocId)).toBe(true);
    }
    expect(h.router.socketPathOf(PLUGIN)).not.toBe(h.router.socketPathOf(long));
    expect(h.logger.find('its controller calls are routed to a node that has one', 'info').map((r) => r.fields['plugin_id'])).toEqual([
      PLUGIN,
      long,
    ]);

    // Again, nothing changed: no new registration, no new line.
    const puts = h.store.puts;
    await h.router.reconcile();
    expect(h.store.puts).toBe(puts);
    expect(h.logger.find('its controller calls are routed', 'info')).toHaveLength(2);
  });

  it('sends a call made on the served socket to the node with the controller, and its status back', async () => {
    h.nodePluginHere();
    h.nodes(node('alpha'));
    await h.router.reconcile();
    h.caller.on('alpha', (call) =>
      call.rpc === 'GetPluginInfo'
        ? { response: { name: 'hp.csi.example', vendorVersion: '1.2.3', manifest: {} } }
        : { error: { code: GrpcStatus.NOT_FOUND, details: 'volume "ext-1" does not exist' } },
    );
    const invoker = new GrpcInvoker(`unix://${h.router.socketPathOf(PLUGIN)}`);
    try {
      const deadline = () => new Date(Date.now() + 10_000);
      await expect(invoker.unary('identity', 'GetPluginInfo', {}, deadline())).resolves.toEqual({
        name: 'hp.csi.example',
        vendorVersion: '1.2.3',
        manifest: {},
      });
      await expect(
        invoker.unary('controller', 'ControllerPublishVolume', { volumeId: 'ext-1', nodeId: SELF }, deadline()),
      ).rejects.toMatchObject({
        code: GrpcStatus.NOT_FOUND,
        details: 'volume "ext-1" does not exist',
      });
    } finally {
      invoker.dispose();
    }
    expect(h.caller.calls.map((c) => [c.node, c.service, c.rpc])).toEqual([
      ['alpha', 'identity', 'GetPluginInfo'],
      ['alpha', 'controller', 'ControllerPublishVolume'],
    ]);
    expect(h.caller.calls[1]!.request).toMatchObject({ volumeId: 'ext-1', nodeId: SELF });
  });

  it('hands over to a controller of its own once that serves healthy: the routed one is deregistered and its socket removed', async () => {
    h.nodePluginHere();
    h.nodes(node('alpha'));
    await h.router.reconcile();
    const socketPath = h.router.socketPathOf(PLUGIN);
    expect(isSocket(socketPath)).toBe(true);

    // The own controller arrives; it is newest, so active, but still starting.
    h.registry.register({
      type: 'csi-controller',
      name: PLUGIN,
      allocId: 'alloc-ctl',
      socketPath: path.join(h.dir, 'ctl.sock'),
      version: '1.0.0',
    });
    h.serving.set(PLUGIN, { allocId: 'alloc-ctl', healthy: false });
    await h.router.reconcile();
    expect(h.registry.registrations('csi-controller', PLUGIN).map((r) => r.allocId)).toEqual(['alloc-ctl', ROUTED]);
    expect(isSocket(socketPath)).toBe(true);

    // The routed one serving healthy is no controller of its own.
    h.serving.set(PLUGIN, { allocId: ROUTED, healthy: true });
    expect(h.router.wantedPlugins()).toEqual(new Set([PLUGIN]));

    h.serving.set(PLUGIN, { allocId: 'alloc-ctl', healthy: true });
    expect(h.router.wantedPlugins()).toEqual(new Set());
    await h.router.reconcile();
    expect(h.registry.registrations('csi-controller', PLUGIN).map((r) => r.allocId)).toEqual(['alloc-ctl']);
    expect(exists(socketPath)).toBe(false);
    expect(h.logger.find('no longer routed from this node', 'info')).toHaveLength(1);
  });

  it('stops routing when no node has the controller any more, or the node plugin goes', async () => {
    h.nodePluginHere();
    h.nodes(node('alpha'));
    await h.router.reconcile();
    h.nodes(node('alpha', { plugins: [] }));
    await h.router.reconcile();
    expect(h.registry.list('csi-controller')).toEqual([]);
    expect(exists(h.router.socketPathOf(PLUGIN))).toBe(false);

    h.nodes(node('alpha'));
    await h.router.reconcile();
    expect(h.registry.get('csi-controller', PLUGIN)?.allocId).toBe(ROUTED);
    h.registry.deregister('csi-node', PLUGIN, 'alloc-node');
    await h.router.reconcile();
    expect(h.registry.list('csi-controller')).toEqual([]);
    expect(exists(h.router.socketPathOf(PLUGIN))).toBe(false);
  });

  it('registers again a routed controller read back as restored after a restart (a fresh fingerprint)', async () => {
    h.nodePluginHere();
    h.nodes(node('alpha'));
    await h.router.reconcile();
    await h.restart();
    expect(h.registry.get('csi-controller', PLUGIN)).toMatchObject({ allocId: ROUTED, restored: true });
    const registered: string[] = [];
    h.registry.onDidRegister((e) => registered.push(`${e.plugin.allocId}:${e.reason}`));

    await h.router.reconcile();
    expect(h.registry.get('csi-controller', PLUGIN)).toMatchObject({ allocId: ROUTED, restored: false });
    expect(registered).toContain(`${ROUTED}:confirmed`);
    expect(isSocket(h.router.socketPathOf(PLUGIN))).toBe(true);
  });

  it('removes a restored routed controller that is no longer wanted', async () => {
    h.nodePluginHere();
    h.nodes(node('alpha'));
    await h.router.reconcile();
    await h.restart();
    h.nodes();
    await h.router.reconcile();
    expect(h.registry.list('csi-controller')).toEqual([]);
  });

  it('dispose() stops serving and keeps the registration for the next agent; reconcile() after it does nothing', async () => {
    h.nodePluginHere();
    h.nodes(node('alpha'));
    await h.router.reconcile();
    const socketPath = h.router.socketPathOf(PLUGIN);
    expect(isSocket(socketPath)).toBe(true);

    await h.router.dispose();
    expect(exists(socketPath)).toBe(false);
    expect(h.registry.get('csi-controller', PLUGIN)?.allocId).toBe(ROUTED);

    await h.router.reconcile();
    expect(exists(socketPath)).toBe(false);
  });

  it('runs one reconcile at a time; calls meanwhile are served by one more run', async () => {
    h.nodePluginHere();
    h.nodes(node('alpha'));
    await Promise.all([h.router.reconcile(), h.router.reconcile(), h.router.reconcile()]);
    expect(isSocket(h.router.socketPathOf(PLUGIN))).toBe(true);
    expect(h.registry.registrations('csi-controller', PLUGIN).map((r) => r.allocId)).toEqual([ROUTED]);
    expect(h.logger.find('its controller calls are routed', 'info')).toHaveLength(1);
  });

  it("never lets one plugin's failure hold the others, and tries it again at the next reconcile", async () => {
    h.nodePluginHere('aa', 'alloc-node-aa');
    h.nodePluginHere('bb', 'alloc-node-bb');
    h.nodes(node('alpha', { plugins: [controllerOf('aa'), controllerOf('bb')] }));
    // Something that is not a socket sits where aa's socket goes: serving it fails.
    const blocked = h.router.socketPathOf('aa');
    fs.mkdirSync(path.dirname(blocked), { recursive: true });
    fs.writeFileSync(blocked, 'not a socket');

    await h.router.reconcile();
    expect(h.registry.get('csi-controller', 'aa')).toBeUndefined();
    expect(h.registry.get('csi-controller', 'bb')?.allocId).toBe(`${ROUTED_CONTROLLER_PREFIX}bb`);
    const warned = h.logger.find("could not route the plugin's controller calls from this node", 'warn');
    expect(warned).toHaveLength(1);
    expect(warned[0]!.fields).toMatchObject({ plugin_id: 'aa', error: expect.stringContaining(blocked) });

    fs.rmSync(blocked);
    await h.router.reconcile();
    expect(h.registry.get('csi-controller', 'aa')?.allocId).toBe(`${ROUTED_CONTROLLER_PREFIX}aa`);
    expect(isSocket(blocked)).toBe(true);
  });
});

describe('answerRoutedCall', () => {
  it.each([
    ['a service other than identity or controller', 'node', 'NodeStageVolume', {}, 'service must be identity or controller (got "node")'],
    [
      'an RPC the service does not have',
      'controller',
      'NodeStageVolume',
      {},
      '"NodeStageVolume" is not an RPC of the CSI controller service',
    ],
    ['a request that is null', 'controller', 'CreateVolume', null, 'request must be a JSON object'],
    ['a request that is an array', 'controller', 'CreateVolume', [], 'request must be a JSON object'],
    ['a request that is a string', 'controller', 'CreateVolume', 'vol', 'request must be a JSON object'],
  ])('refuses %s with a 400', async (_what, service, rpc, request, message) => {
    const err = await answerRoutedCall(h.registry, PLUGIN, service, rpc, request).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 400, code: ApiErrorCode.Invalid });
    expect((err as ApiError).message).toContain(message);
  });

  it('is a 503 EPLUGIN_UNAVAILABLE without a controller of its own (a routed one is never served onwards)', async () => {
    await expect(answerRoutedCall(h.registry, PLUGIN, 'identity', 'GetPluginInfo', {})).rejects.toThrow(RoutedControllerUnavailableError);
    h.registry.register({ type: 'csi-controller', name: PLUGIN, allocId: ROUTED, socketPath: h.router.socketPathOf(PLUGIN), version: '' });
    const err = await answerRoutedCall(h.registry, PLUGIN, 'identity', 'GetPluginInfo', {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RoutedControllerUnavailableError);
    expect(err).toMatchObject({
      status: 503,
      code: 'EPLUGIN_UNAVAILABLE',
      message: `no controller of plugin "${PLUGIN}" runs on this node`,
    });
  });

  it("makes the call on its own controller's socket and answers with the response or the plugin's status", async () => {
    const socketPath = await h.servePlugin('own', {
      identity: { GetPluginInfo: () => ({ name: 'hp.csi.example', vendorVersion: '1.2.3', manifest: { node: 'beta' } }) },
      controller: {
        ControllerPublishVolume: (req) => {
          throw new CSIStatusError(GrpcStatus.NOT_FOUND, `volume "${req.volumeId}" does not exist`);
        },
      },
    });
    h.registry.register({ type: 'csi-controller', name: PLUGIN, allocId: 'alloc-ctl', socketPath, version: '1.2.3' });
    // A routed one registered after it (active now) is passed over for the own controller.
    h.registry.register({ type: 'csi-controller', name: PLUGIN, allocId: ROUTED, socketPath: h.router.socketPathOf(PLUGIN), version: '' });
    expect(h.registry.get('csi-controller', PLUGIN)?.allocId).toBe(ROUTED);

    await expect(answerRoutedCall(h.registry, PLUGIN, 'identity', 'GetPluginInfo', {})).resolves.toEqual({
      response: { name: 'hp.csi.example', vendorVersion: '1.2.3', manifest: { node: 'beta' } },
    });
    await expect(
      answerRoutedCall(h.registry, PLUGIN, 'controller', 'ControllerPublishVolume', { volumeId: 'ext-1', nodeId: 'n1' }),
    ).resolves.toEqual({
      error: { code: GrpcStatus.NOT_FOUND, details: 'volume "ext-1" does not exist' },
    });
    const unimplemented = await answerRoutedCall(h.registry, PLUGIN, 'controller', 'CreateVolume', { name: 'vol-1' });
    expect(unimplemented).toEqual({
      error: { code: GrpcStatus.UNIMPLEMENTED, details: expect.stringContaining('CreateVolume is not implemented') },
    });
  });

  it("is a 503 EPLUGIN_UNAVAILABLE when its controller's socket answers no one", async () => {
    h.registry.register({
      type: 'csi-controller',
      name: PLUGIN,
      allocId: 'alloc-ctl',
      socketPath: path.join(h.dir, 'nobody.sock'),
      version: '1.0.0',
    });
    const err = await answerRoutedCall(h.registry, PLUGIN, 'controller', 'CreateVolume', { name: 'vol-1' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RoutedControllerUnavailableError);
    expect(err).toMatchObject({ status: 503, code: 'EPLUGIN_UNAVAILABLE' });
    expect((err as Error).message).toContain(`the controller of plugin "${PLUGIN}" on this node is not answering`);
  });
});
