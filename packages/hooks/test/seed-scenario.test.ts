// Integration: the seed scenario (a workload restored before its CSI plugin
// re-registered must wait, not fail) and its neighbours, end to end — the
// real hostpath plugin process, real gRPC over unix sockets, a real SQLite
// state file, real bind mounts, and each agent incarnation composed through
// a tsyringe child container as the agent composes itself (with the volume
// reconciler of @csiplug/volumes owning every mount and retry). An "agent
// restart" shuts an incarnation down without running any task stop hook and
// builds the next one over the same data dir.
import type { TimeoutSettings } from '@csiplug/core';
import { CSIPluginWaitTimeoutError } from '@csiplug/csimanager';
import { ICSIClientFactory, mountCapability, type CSIClientFactory } from '@csiplug/csi';
import { PluginTypeCSIController, PluginTypeCSINode, type RegistryStateRecord } from '@csiplug/registry';
import type { ClientStateDB } from '@csiplug/state';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  EVENT_VOLUME_KEPT_PLUGIN_AWAY,
  EVENT_VOLUME_MOUNT_FAILED,
  EVENT_WAITING_FOR_PLUGIN,
  EVENT_VOLUME_MOUNTED,
  LIVE_MOUNT_EVENTS,
  EVENT_VOLUME_UNMOUNT_PENDING,
  TASK_EVENT_PLUGIN_UNHEALTHY,
  VolumeHookError,
  pluginSocketDir,
  type CSIPluginSupervisorHook,
  type RunKind,
  type VolumeRequest,
} from '../src';
import { allocContext, taskContext, type RecordingAllocContext, type RecordingTaskContext } from '../src/testing/task-context';
import { AgentIncarnation } from './agent-incarnation';
import { CountingClaimer } from './counting-claimer';
import { forceUnmountUnder, mountIdsAt, mountsUnder } from './mounts';
import { PluginProcess } from './plugin-process';
import { requireRoot } from '@csiplug/core/testing';

requireRoot();

const PLUGIN_ALLOC = 'plugin-alloc';
const WORKLOAD_ALLOC = 'web-alloc';
const VOLUME_ID = 'vol-data';
const DATA_VOLUME: VolumeRequest = {
  name: 'data',
  type: 'csi',
  source: VOLUME_ID,
  accessMode: 'single-node-writer',
  attachmentMode: 'file-system',
  readOnly: false,
};
const BOTH_ENTRIES = [
  { type: PluginTypeCSIController, name: 'hostpath' },
  { type: PluginTypeCSINode, name: 'hostpath' },
];
// Generous limits: only the timeout scenario shortens the restore wait, and
// failed unmounts retry quickly so the resume scenario stays short.
const TIMEOUTS = { pluginWaitPrerun: 20_000, pluginWaitRestore: 20_000, unmountBackoffBase: 200, unmountBackoffMax: 1_000 };

/** Whether `p` settles within `ms` of real time (it keeps running either way). */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  const settled = p.then(
    () => true,
    () => true,
  );
  try {
    return await Promise.race([settled, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `check` until it holds (real processes, real time); fails with `what` after `ms`. */
async function eventually(what: string, check: () => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('seed scenario: csi hooks across agent restarts with the real hostpath plugin', () => {
  jest.setTimeout(45_000);

  let tmp: string;
  let dataDir: string;
  let pluginStateDir: string;
  let claimer: CountingClaimer;
  let agents: AgentIncarnation[];

  beforeEach(() => {
    // Short: the plugin's socket path (<tmp>/d/plugins/<alloc>/csi.sock) must stay under 108 bytes.
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-'));
    dataDir = path.join(tmp, 'd');
    pluginStateDir = path.join(tmp, 'hp');
    claimer = new CountingClaimer();
    agents = [];
  });

  afterEach(async () => {
    for (const agent of agents) await agent.dispose().catch(() => undefined);
    await PluginProcess.killAll();
    const forced = forceUnmountUnder(tmp);
    const stuck = mountsUnder(tmp).map((m) => m.mountPoint);
    fs.rmSync(tmp, { recursive: true, force: true });
    // A test that leaves a mount behind fails, even if its assertions passed.
    expect({ forced, stuck }).toEqual({ forced: [], stuck: [] });
  });

  async function startAgent(
    timeouts: Partial<TimeoutSettings> = {},
    wrapState?: (db: ClientStateDB) => ClientStateDB,
  ): Promise<AgentIncarnation> {
    const agent = await AgentIncarnation.start({
      dataDir,
      claimer,
      timeouts: { ...TIMEOUTS, ...timeouts },
      ...(wrapState ? { wrapState } : {}),
    });
    agents.push(agent);
    return agent;
  }

  /** An agent restart: the old incarnation lets go of everything without stopping a task; a new one starts over the same data dir. */
  async function restartAgent(old: AgentIncarnation, timeouts: Partial<TimeoutSettings> = {}): Promise<AgentIncarnation> {
    await old.dispose();
    return startAgent(timeouts);
  }

  interface PluginTask {
    hook: CSIPluginSupervisorHook;
    ctx: RecordingTaskContext;
    proc: PluginProcess;
    endpoint: string;
  }

  /** Runs the plugin task as a task runner would: prestart, start the process with its env, poststart. */
  async function runPluginTask(agent: AgentIncarnation, kind: RunKind): Promise<PluginTask> {
    const hook = agent.supervisor();
    const ctx = taskContext({ alloc: { id: PLUGIN_ALLOC, jobId: 'plugin', group: 'nodes' }, task: { name: 'plugin' }, kind });
    const { env = {} } = (await hook.prestart(ctx)) ?? {};
    const endpoint = env.CSI_ENDPOINT;
    if (!endpoint) throw new Error('the supervisor prestart gave the task no CSI_ENDPOINT');
    const proc = PluginProcess.start({ env, stateDir: pluginStateDir });
    await hook.poststart(ctx);
    if (ctx.restarts.length > 0) throw new Error(`plugin task restart requested: ${ctx.restarts.join('; ')}\nplugin stderr: ${proc.log}`);
    return { hook, ctx, proc, endpoint };
  }

  async function createVolume(agent: AgentIncarnation, endpoint: string): Promise<string> {
    const client = agent.container.resolve<CSIClientFactory>(ICSIClientFactory).createClient(endpoint);
    try {
      const res = await client.createVolume({ name: VOLUME_ID, volumeCapabilities: [mountCapability('SINGLE_NODE_WRITER')] });
      return res.volume!.volumeId;
    } finally {
      client.dispose();
    }
  }

  function workloadContext(kind: RunKind): RecordingAllocContext {
    return allocContext({ alloc: { id: WORKLOAD_ALLOC, jobId: 'web', group: 'app', volumes: [DATA_VOLUME] }, kind });
  }

  interface MountedWorkload {
    plugin: PluginTask;
    hostPath: string;
    mountIds: number[];
  }

  /** Incarnation A's part: plugin up and registered, a volume created, the workload's prerun mounted it, a file written through it. */
  async function mountWorkload(agent: AgentIncarnation): Promise<MountedWorkload> {
    const plugin = await runPluginTask(agent, 'start');
    expect(plugin.hook.registrations).toEqual(BOTH_ENTRIES);
    claimer.add(VOLUME_ID, await createVolume(agent, plugin.endpoint));

    const ctx = workloadContext('start');
    const result = await agent.csiHook().prerun(ctx);
    const hostPath = result.volumes?.data?.hostPath;
    if (!hostPath) throw new Error(`prerun published no path: ${JSON.stringify(ctx.events)}`);
    expect(hostPath.startsWith(dataDir + '/')).toBe(true);
    expect(ctx.events.map((e) => e.type)).toEqual([EVENT_VOLUME_MOUNTED]);
    expect(claimer.claims).toHaveLength(1);
    fs.writeFileSync(path.join(hostPath, 'hello.txt'), 'written before the restart');
    const mountIds = mountIdsAt(hostPath);
    expect(mountIds).toHaveLength(1);
    return { plugin, hostPath, mountIds };
  }

  /** The real cleanup path: postrun unmounts (unpublish, then unstage as the last user), the plugin task stops, the plugin exits. */
  async function stopEverything(agent: AgentIncarnation, plugin: PluginTask, workload: RecordingAllocContext): Promise<void> {
    await agent.csiHook().postrun(workload);
    expect(workload.events.filter((e) => e.type === EVENT_VOLUME_UNMOUNT_PENDING)).toEqual([]);
    // The reconciler's records are done and gone, in memory and in the state file.
    expect(agent.reconciler.list(WORKLOAD_ALLOC)).toEqual([]);
    expect(agent.state.listVolumeMounts()).toEqual({ records: [], failures: [] });
    await plugin.hook.stop(plugin.ctx);
    expect(agent.registry.list(PluginTypeCSIController)).toEqual([]);
    expect(agent.registry.list(PluginTypeCSINode)).toEqual([]);
    expect(await plugin.proc.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    expect(mountsUnder(dataDir)).toEqual([]);
  }

  it('a restored workload keeps its live mount at once, without its plugin (no claim, no re-mount), and the mount is checked when the plugin is back', async () => {
    const a = await startAgent();
    const w = await mountWorkload(a);

    // The plugin dies hard (its bind mounts stay), and the agent restarts.
    await w.plugin.proc.kill('SIGKILL');
    const b = await restartAgent(a);
    expect(b.registry.get(PluginTypeCSINode, 'hostpath')?.restored).toBe(true);

    // The seed bug: the restore must not depend on the plugin. The mount table says the mount is live.
    const workload = workloadContext('restore');
    const prerun = b.csiHook().prerun(workload);
    expect(await settlesWithin(prerun, 5_000)).toBe(true);
    const result = await prerun;
    expect(result.volumes?.data).toMatchObject({
      name: 'data',
      volumeId: VOLUME_ID,
      pluginId: 'hostpath',
      hostPath: w.hostPath,
      readOnly: false,
    });
    expect(workload.events.map((e) => e.type)).toEqual([EVENT_VOLUME_KEPT_PLUGIN_AWAY]);
    expect(workload.events[0]!.message).toContain('hostpath');
    expect(claimer.claims).toHaveLength(1); // only incarnation A's
    expect(mountIdsAt(w.hostPath)).toEqual(w.mountIds); // the same mount, not a new one
    expect(fs.readFileSync(path.join(w.hostPath, 'hello.txt'), 'utf8')).toBe('written before the restart');

    // The plugin task is re-attached: its process comes back on the same socket and the supervisor re-registers it.
    const plugin = await runPluginTask(b, 'restore');
    expect(plugin.endpoint).toBe(w.plugin.endpoint);
    // The same entries, confirmed — not new ones: by the re-registration (news, a `confirmed` event, which makes the CSI manager
    // fingerprint at once) or, when the manager's own fingerprint of the restored entry reached the plugin first, silently by it.
    for (const type of [PluginTypeCSIController, PluginTypeCSINode])
      expect(b.registry.get(type, 'hostpath')).toMatchObject({ allocId: PLUGIN_ALLOC, restored: false });
    const registered = b.registryEvents.flatMap((e) => (e.kind === 'registered' ? [e] : []));
    expect(registered.map((e) => e.reason)).toEqual(registered.map(() => 'confirmed'));
    expect(b.registryEvents.filter((e) => e.kind === 'deregistered')).toEqual([]);
    // Back: the live mount is checked through the plugin (its volume condition) and found sound.
    await eventually('the live mount checked once the plugin is back', () =>
      workload.events.some((e) => e.type === LIVE_MOUNT_EVENTS.checked),
    );
    expect(workload.events.map((e) => e.type)).not.toContain(LIVE_MOUNT_EVENTS.stale);
    expect(mountIdsAt(w.hostPath)).toEqual(w.mountIds);
    fs.writeFileSync(path.join(w.hostPath, 'after.txt'), 'and after');
    expect(fs.readFileSync(path.join(w.hostPath, 'after.txt'), 'utf8')).toBe('and after');

    await stopEverything(b, plugin, workload);
    expect(claimer.releases).toEqual([{ volumeId: VOLUME_ID, allocId: WORKLOAD_ALLOC }]);
    expect(fs.existsSync(pluginSocketDir(dataDir, PLUGIN_ALLOC))).toBe(false);
  });

  it('a live mount is kept however long its plugin stays away; only a mount that is gone waits, and fails after the restore limit with a clear error, nothing half-mounted', async () => {
    const a = await startAgent();
    const w = await mountWorkload(a);
    await w.plugin.proc.kill('SIGKILL');
    const b = await restartAgent(a, { pluginWaitRestore: 1_500 });

    // Kept at once, and still there at 2x the restore limit: no limit applies to a live mount.
    const kept = workloadContext('restore');
    expect((await b.csiHook().prerun(kept)).volumes?.data?.hostPath).toBe(w.hostPath);
    await new Promise((r) => setTimeout(r, 3_000));
    expect(mountIdsAt(w.hostPath)).toEqual(w.mountIds);
    expect(b.reconciler.pendingUnmounts()).toEqual([]);

    // The target mount goes (as after a host reboot) while the agent is away: now the restore needs the plugin.
    execFileSync('umount', [w.hostPath]);
    const c = await restartAgent(b, { pluginWaitRestore: 3_000 });
    const workload = workloadContext('restore');
    const err = await c
      .csiHook()
      .prerun(workload)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(VolumeHookError);
    const message = (err as Error).message;
    expect(message).toContain(`volume "data" (${VOLUME_ID}) on plugin hostpath`);
    expect(message).toContain('(restore limit) waiting for plugin "hostpath" of type csi-node');
    expect(message).toContain("check the plugin task's logs");
    expect((err as Error).cause).toBeInstanceOf(CSIPluginWaitTimeoutError);
    // What the user reads in alloc status: it waited for the plugin, with the limit, then failed with why.
    expect(workload.events).toEqual([
      expect.objectContaining({
        type: EVENT_WAITING_FOR_PLUGIN,
        message: expect.stringMatching(
          /^waiting for plugin hostpath \(csi-node\) to mount volume "data" \(vol-data\), limit \d+(s|ms|s\d+ms)$/,
        ),
      }),
      expect.objectContaining({ type: EVENT_VOLUME_MOUNT_FAILED, message, failed: true }),
    ]);
    // Nothing half-mounted and nothing torn down behind the alloc's back: the
    // volume stays wanted until the alloc's postrun unmounts it.
    expect(mountIdsAt(w.hostPath)).toEqual([]);
    expect(claimer.claims).toHaveLength(1);
    expect(c.reconciler.pendingUnmounts()).toEqual([]);
    expect(c.reconciler.list(WORKLOAD_ALLOC)).toEqual([
      expect.objectContaining({ name: 'data', desired: 'mounted', targetPath: w.hostPath }),
    ]);

    // The plugin comes back: the alloc's postrun unmounts what is left (the staging mount) through the real path.
    const plugin = await runPluginTask(c, 'restore');
    await c.csiManager.waitForPlugin(PluginTypeCSINode, 'hostpath', 'restore');
    await stopEverything(c, plugin, workload);
    expect(claimer.releases).toEqual([{ volumeId: VOLUME_ID, allocId: WORKLOAD_ALLOC }]);
  });

  it('an agent that shuts down while a restored workload waits to mount a gone mount again leaves it to the next agent, which mounts it once the plugin is back', async () => {
    const a = await startAgent();
    const w = await mountWorkload(a);
    await w.plugin.proc.kill('SIGKILL');
    execFileSync('umount', [w.hostPath]); // the target mount is gone; the staging mount stays
    const b = await restartAgent(a);
    const waiting = workloadContext('restore');
    const prerun = b.csiHook().prerun(waiting);
    expect(await settlesWithin(prerun, 500)).toBe(false); // waiting for the plugin, not failing

    // The agent shuts down again before the plugin is back: its alloc runner
    // detaches, which aborts the phase; the workload's tasks keep running.
    waiting.controller.abort();
    await expect(prerun).rejects.toBeInstanceOf(VolumeHookError);
    expect(b.reconciler.pendingUnmounts()).toEqual([]);
    expect(b.reconciler.list(WORKLOAD_ALLOC)).toEqual([
      expect.objectContaining({ name: 'data', desired: 'mounted', targetPath: w.hostPath }),
    ]);
    const c = await restartAgent(b);
    expect(c.reconciler.pendingUnmounts()).toEqual([]);

    // The next agent re-attaches the plugin task, then restores the workload:
    // the target is published again (same path, same data), under the same claim.
    const plugin = await runPluginTask(c, 'restore');
    await c.csiManager.waitForPlugin(PluginTypeCSINode, 'hostpath', 'restore');
    const workload = workloadContext('restore');
    const result = await c.csiHook().prerun(workload);
    expect(result.volumes?.data?.hostPath).toBe(w.hostPath);
    expect(mountIdsAt(w.hostPath)).toHaveLength(1);
    expect(fs.readFileSync(path.join(w.hostPath, 'hello.txt'), 'utf8')).toBe('written before the restart');
    expect(new Set(claimer.claims.map((r) => `${r.volumeId}/${r.allocId}`))).toEqual(new Set([`${VOLUME_ID}/${WORKLOAD_ALLOC}`]));

    await stopEverything(c, plugin, workload);
    expect(claimer.releases).toEqual([{ volumeId: VOLUME_ID, allocId: WORKLOAD_ALLOC }]);
  });

  it('a monolith plugin task registers two entries and its stop removes both, and its socket dir', async () => {
    const a = await startAgent();
    const plugin = await runPluginTask(a, 'start');
    expect(a.registry.list(PluginTypeCSIController).map((p) => p.allocId)).toEqual([PLUGIN_ALLOC]);
    expect(a.registry.list(PluginTypeCSINode).map((p) => p.allocId)).toEqual([PLUGIN_ALLOC]);
    expect(Object.keys(a.state.getRegistryState<RegistryStateRecord>()?.plugins ?? {}).sort()).toEqual([
      PluginTypeCSIController,
      PluginTypeCSINode,
    ]);
    await a.csiManager.waitForPlugin(PluginTypeCSINode, 'hostpath', 'prerun');
    await a.csiManager.waitForPlugin(PluginTypeCSIController, 'hostpath', 'prerun');

    await plugin.hook.stop(plugin.ctx);
    expect(plugin.hook.registrations).toEqual([]);
    expect(a.registry.list(PluginTypeCSIController)).toEqual([]);
    expect(a.registry.list(PluginTypeCSINode)).toEqual([]);
    expect(a.state.getRegistryState<RegistryStateRecord>()?.plugins).toEqual({});
    expect(
      a.registryEvents
        .filter((e) => e.kind === 'deregistered')
        .map((e) => e.plugin.type)
        .sort(),
    ).toEqual([PluginTypeCSIController, PluginTypeCSINode]);
    expect(fs.existsSync(pluginSocketDir(dataDir, PLUGIN_ALLOC))).toBe(false);
    expect(await plugin.proc.kill('SIGTERM')).toEqual({ code: 0, signal: null });

    // And a restarted agent finds nothing to restore.
    const b = await restartAgent(a);
    expect(b.registry.list(PluginTypeCSIController)).toEqual([]);
    expect(b.registry.list(PluginTypeCSINode)).toEqual([]);
  });

  it('a failed second registration rolls back the first and asks for a task restart', async () => {
    let writes = 0;
    const failSecondWrite = (db: ClientStateDB): ClientStateDB =>
      new Proxy(db, {
        get(target, prop, receiver) {
          if (prop === 'putRegistryState') {
            return (state: Parameters<ClientStateDB['putRegistryState']>[0]) => {
              if (++writes === 2) throw new Error('disk full (injected)');
              target.putRegistryState(state);
            };
          }
          const value: unknown = Reflect.get(target, prop, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    const a = await startAgent({}, failSecondWrite);
    const hook = a.supervisor();
    const ctx = taskContext({ alloc: { id: PLUGIN_ALLOC, jobId: 'plugin', group: 'nodes' }, kind: 'start' });
    const { env = {} } = (await hook.prestart(ctx)) ?? {};
    const proc = PluginProcess.start({ env, stateDir: pluginStateDir });
    await hook.poststart(ctx);

    expect(writes).toBe(3); // register controller, register node (fails), deregister controller
    expect(ctx.restarts).toHaveLength(1);
    expect(ctx.restarts[0]).toMatch(/plugin hostpath could not be registered: .*disk full \(injected\)/);
    expect(ctx.events.at(-1)).toMatchObject({
      type: TASK_EVENT_PLUGIN_UNHEALTHY,
      message: expect.stringContaining('failed to register plugin: hostpath'),
    });
    expect(hook.registrations).toEqual([]);
    expect(a.registry.list(PluginTypeCSIController)).toEqual([]);
    expect(a.registry.list(PluginTypeCSINode)).toEqual([]);
    expect(a.state.getRegistryState<RegistryStateRecord>()?.plugins).toEqual({});
    expect(a.registryEvents.map((e) => `${e.kind}:${e.plugin.type}`)).toEqual(['registered:csi-controller', 'deregistered:csi-controller']);

    // The task runner would now stop and restart the task; here it just stops.
    await hook.stop(ctx);
    expect(await proc.kill('SIGTERM')).toEqual({ code: 0, signal: null });
    const b = await restartAgent(a);
    expect(b.registry.list(PluginTypeCSIController)).toEqual([]);
    expect(b.registry.list(PluginTypeCSINode)).toEqual([]);
  });

  it('an unmount that failed is resumed by the next agent once the plugin is back', async () => {
    const a = await startAgent();
    const w = await mountWorkload(a);

    // The node plugin is gone when the workload stops: the unmount cannot happen now.
    await w.plugin.proc.kill('SIGKILL');
    const workload = workloadContext('start');
    await a.csiHook().postrun(workload);
    expect(workload.events.map((e) => e.type)).toEqual([EVENT_VOLUME_UNMOUNT_PENDING]);
    const pending = expect.objectContaining({
      allocId: WORKLOAD_ALLOC,
      name: 'data',
      volumeId: VOLUME_ID,
      pluginId: 'hostpath',
      desired: 'unmounted',
      claimed: true,
      published: true,
    });
    expect(a.reconciler.pendingUnmounts()).toEqual([pending]);
    expect(a.state.listVolumeMounts().records.map((r) => r.record)).toEqual([pending]); // saved for the next agent
    expect(claimer.releases).toEqual([]);
    expect(mountIdsAt(w.hostPath)).toEqual(w.mountIds);

    // The agent restarts before the plugin is back; the new one resumes the saved unmount.
    const b = await restartAgent(a);
    expect(b.reconciler.pendingUnmounts()).toEqual([pending]);
    const plugin = await runPluginTask(b, 'restore');
    await eventually('the pending unmount completes', () => b.reconciler.pendingUnmounts().length === 0);

    expect(claimer.releases).toEqual([{ volumeId: VOLUME_ID, allocId: WORKLOAD_ALLOC }]);
    expect(b.reconciler.list(WORKLOAD_ALLOC)).toEqual([]);
    expect(b.state.listVolumeMounts()).toEqual({ records: [], failures: [] });
    expect(mountsUnder(dataDir)).toEqual([]);

    await plugin.hook.stop(plugin.ctx);
    expect(await plugin.proc.kill('SIGTERM')).toEqual({ code: 0, signal: null });
  });
});
