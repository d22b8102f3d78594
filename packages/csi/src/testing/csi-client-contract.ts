// The behaviours of a CSIClient (over a node + controller plugin) that the
// tests above it rely on, as jest tests: run against FakeCSIClient (csi's own
// tests) and against GrpcCSIClient over a real unix socket to the reference
// hostpath plugin (the hostpath plugin's tests), so the fake answers what a
// real plugin answers.
import { ShutdownError } from '@csiplug/core';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { mountCapability, nodeCapabilitiesFrom, pluginCapabilitiesFrom } from '../capabilities';
import type { CSIClient } from '../client';
import { CSIError, isNotFound } from '../errors';
import type * as JestGlobals from '@jest/globals';

/** One implementation under test, made fresh for each test. */
export interface CSIClientContractSubject {
  /** A client of a plugin that serves the node and the controller services and is ready. */
  readonly client: CSIClient;
  /** The node id the plugin was started with. */
  readonly nodeId: string;
  /** A directory the plugin may mount under (staging and target paths are made below it). */
  readonly dir: string;
  /** Whether `path` is a mount point now: the kernel's table for a real plugin, the fake's mount points for the fake. */
  isMounted(path: string): Promise<boolean>;
  /** Closes clients, stops processes, unmounts and removes whatever the test left. */
  cleanup(): Promise<void>;
}

const CAP = mountCapability('SINGLE_NODE_WRITER');

/**
 * Registers the CSIClient contract's tests under `describe(name)`. `make`
 * runs before each test; its subject's cleanup after it.
 */
export function describeCSIClientContract(name: string, make: () => Promise<CSIClientContractSubject>): void {
  // Jest's functions, loaded when the suite is described (not when the testing entry is imported: it loads outside jest too); @jest/globals is an optional peer dependency.
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded lazily on purpose, as said above
  const { afterEach, beforeEach, describe, expect, it } = require('@jest/globals') as typeof JestGlobals;
  describe(`CSIClient contract: ${name}`, () => {
    let s: CSIClientContractSubject;
    let staging: string;
    let target: string;

    beforeEach(async () => {
      s = await make();
      staging = `${s.dir}/staging/vol`;
      target = `${s.dir}/target/alloc-1/vol`;
    });
    afterEach(async () => {
      await s.cleanup();
    });

    /** Creates a volume through the controller; its id is what the node calls take. */
    async function createVolume(volumeName = 'contract-vol'): Promise<string> {
      const res = await s.client.createVolume({ name: volumeName, volumeCapabilities: [CAP], capacityRange: { requiredBytes: 1024 } });
      const id = res.volume?.volumeId;
      expect(typeof id).toBe('string');
      expect(id).not.toBe('');
      return id!;
    }

    const stage = (volumeId: string) => s.client.nodeStageVolume({ volumeId, stagingTargetPath: staging, volumeCapability: CAP });
    const publish = (volumeId: string) =>
      s.client.nodePublishVolume({ volumeId, stagingTargetPath: staging, targetPath: target, volumeCapability: CAP, readonly: false });
    const unpublish = (volumeId: string) => s.client.nodeUnpublishVolume({ volumeId, targetPath: target });
    const unstage = (volumeId: string) => s.client.nodeUnstageVolume({ volumeId, stagingTargetPath: staging });

    async function rejection(p: Promise<unknown>): Promise<unknown> {
      try {
        await p;
      } catch (err) {
        return err;
      }
      throw new Error('expected the call to fail; it succeeded');
    }

    it('Probe answers ready', async () => {
      expect(await s.client.probe()).toEqual({ ready: true });
    });

    it('GetPluginInfo names the plugin and its version', async () => {
      const info = await s.client.getPluginInfo();
      expect(info.name).toMatch(/\S/);
      expect(info.vendorVersion).toMatch(/\S/);
    });

    it('GetPluginCapabilities reports the controller service', async () => {
      expect(pluginCapabilitiesFrom(await s.client.getPluginCapabilities()).controllerService).toBe(true);
    });

    it('NodeGetCapabilities reports staging, and the client remembers it', async () => {
      expect(s.client.knownNodeCapabilities).toBeUndefined();
      const caps = nodeCapabilitiesFrom(await s.client.nodeGetCapabilities());
      expect(caps.stageUnstageVolume).toBe(true);
      expect(s.client.knownNodeCapabilities?.stageUnstageVolume).toBe(true);
    });

    it('NodeGetInfo gives the node id, no volume limit ("0") and a topology', async () => {
      const info = await s.client.nodeGetInfo();
      expect(info.nodeId).toBe(s.nodeId);
      expect(String(info.maxVolumesPerNode)).toBe('0');
      expect(Object.keys(info.accessibleTopology?.segments ?? {}).length).toBeGreaterThan(0);
    });

    it('CreateVolume is idempotent by name', async () => {
      expect(await createVolume('same')).toBe(await createVolume('same'));
    });

    it('stage then publish mounts both paths, and each is idempotent', async () => {
      await s.client.nodeGetCapabilities();
      const id = await createVolume();
      await stage(id);
      await stage(id);
      expect(await s.isMounted(staging)).toBe(true);
      await publish(id);
      await publish(id);
      expect(await s.isMounted(target)).toBe(true);
    });

    it('unpublish then unstage unmount both paths, and each is idempotent', async () => {
      await s.client.nodeGetCapabilities();
      const id = await createVolume();
      await stage(id);
      await publish(id);
      await unpublish(id);
      await unpublish(id);
      expect(await s.isMounted(target)).toBe(false);
      expect(await s.isMounted(staging)).toBe(true);
      await unstage(id);
      await unstage(id);
      expect(await s.isMounted(staging)).toBe(false);
    });

    it('answers NOT_FOUND (by code) to node calls for a volume the plugin does not have', async () => {
      await s.client.nodeGetCapabilities();
      for (const call of [() => unpublish('no-such-volume'), () => unstage('no-such-volume'), () => stage('no-such-volume')]) {
        const err = await rejection(call());
        expect(err).toBeInstanceOf(CSIError);
        expect(isNotFound(err)).toBe(true);
        expect((err as CSIError).grpcCode).toBe(GrpcStatus.NOT_FOUND);
      }
      expect(await s.isMounted(staging)).toBe(false);
    });

    it('a call with an aborted signal rejects with the signal’s reason', async () => {
      const ac = new AbortController();
      ac.abort(new Error('caller gave up'));
      await expect(s.client.probe({ signal: ac.signal })).rejects.toThrow('caller gave up');
    });

    it('calls after dispose() fail with ShutdownError', async () => {
      s.client.dispose();
      s.client.dispose();
      await expect(s.client.probe()).rejects.toBeInstanceOf(ShutdownError);
    });
  });
}
