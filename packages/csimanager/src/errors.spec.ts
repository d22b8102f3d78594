// The CSI manager's errors: each one's stable code and the message that
// names the plugin, volume or alloc and says what to do; and
// isPluginUnavailable, which tells "the plugin is away for now" (wait and ask
// again) from an answer, through a cause chain.
import { CsiplugError, ShutdownError, TimeoutError } from '@csiplug/core';
import { GrpcStatus } from '@csiplug/csi';
import { csiError } from '@csiplug/csi/testing';
import {
  CSIManagerError,
  CSIPluginWaitTimeoutError,
  FingerprintError,
  PluginInstanceNotFoundError,
  PluginInstanceStoppedError,
  PluginOptionsError,
  VolumeOperationError,
  isPluginUnavailable,
} from './errors';

describe('CSI manager errors', () => {
  it('PluginInstanceNotFoundError names the plugin and says to wait for it', () => {
    const err = new PluginInstanceNotFoundError('csi-node', 'nfs');
    expect(err).toBeInstanceOf(CSIManagerError);
    expect(err).toMatchObject({
      code: 'ECSI_PLUGIN_NOT_FOUND',
      name: 'PluginInstanceNotFoundError',
      pluginType: 'csi-node',
      pluginName: 'nfs',
    });
    expect(err.message).toBe(
      'plugin "nfs" of type csi-node not found: no instance is running for it; ' +
        'check that its plugin task is running and healthy (csiplug plugin status nfs), then try again',
    );
  });

  it('PluginInstanceStoppedError is a ShutdownError naming the plugin, its alloc and why', () => {
    const err = new PluginInstanceStoppedError('csi-node', 'nfs', 'alloc-1', 'replaced by alloc alloc-2');
    expect(err).toBeInstanceOf(ShutdownError);
    expect(err).toMatchObject({ code: 'ESHUTDOWN', pluginType: 'csi-node', pluginName: 'nfs', allocId: 'alloc-1' });
    expect(err.message).toBe('plugin "nfs" of type csi-node (alloc alloc-1) stopped: replaced by alloc alloc-2');
  });

  it('CSIPluginWaitTimeoutError says what it still waited for, how long, under which phase, and the last error', () => {
    const cause = new Error('registry gave up');
    const reg = new CSIPluginWaitTimeoutError('csi-node', 'nfs', 'prerun', 90_000, 'register', { cause });
    expect(reg).toBeInstanceOf(TimeoutError);
    expect(reg).toMatchObject({ code: 'ETIMEOUT', timeoutMs: 90_000, phase: 'prerun', stage: 'register', waitedMs: 90_000, cause });
    expect(reg.message).toBe(
      'timed out after 1m30s (prerun limit) waiting for plugin "nfs" of type csi-node to register; check the plugin task\'s logs',
    );
    const fp = new CSIPluginWaitTimeoutError('csi-controller', 'ebs', 'restore', 500, 'fingerprint', { lastError: 'Probe: UNAVAILABLE' });
    expect(fp.message).toBe(
      'timed out after 500ms (restore limit) waiting for plugin "ebs" of type csi-controller to answer its first fingerprint ' +
        "(last error: Probe: UNAVAILABLE); check the plugin task's logs",
    );
    expect(new CSIPluginWaitTimeoutError('csi-node', 'nfs', 'postrun', 2000, 'healthy').message).toBe(
      'timed out after 2s (postrun limit) waiting for plugin "nfs" of type csi-node to be healthy again; check the plugin task\'s logs',
    );
  });

  it('FingerprintError, PluginOptionsError and VolumeOperationError carry their codes', () => {
    const cause = new Error('x');
    expect(new FingerprintError('empty node id', { cause })).toMatchObject({ code: 'ECSI_FINGERPRINT', message: 'empty node id', cause });
    expect(new PluginOptionsError('bad dir')).toMatchObject({ code: 'ECSI_PLUGIN_OPTIONS', message: 'bad dir' });
    const mount = new VolumeOperationError('mount', 'vol-1', 'alloc-a', 'nfs', 'mount failed', { cause });
    expect(mount).toBeInstanceOf(CsiplugError);
    expect(mount).toMatchObject({
      code: 'ECSI_MOUNT',
      operation: 'mount',
      volumeId: 'vol-1',
      allocId: 'alloc-a',
      pluginId: 'nfs',
      message: 'mount failed',
      cause,
    });
    expect(new VolumeOperationError('unmount', 'vol-1', '', 'nfs', 'unmount failed')).toMatchObject({ code: 'ECSI_UNMOUNT' });
  });

  describe('isPluginUnavailable', () => {
    it('is true for a missing or stopped instance and for UNAVAILABLE, RESOURCE_EXHAUSTED and ABORTED', () => {
      expect(isPluginUnavailable(new PluginInstanceNotFoundError('csi-node', 'nfs'))).toBe(true);
      expect(isPluginUnavailable(new PluginInstanceStoppedError('csi-node', 'nfs', 'a', 'gone'))).toBe(true);
      for (const code of [GrpcStatus.UNAVAILABLE, GrpcStatus.RESOURCE_EXHAUSTED, GrpcStatus.ABORTED]) {
        expect(isPluginUnavailable(csiError(code, 'NodeStageVolume'))).toBe(true);
      }
    });

    it('is false for an answer: another gRPC status, another error, something not an error', () => {
      for (const code of [GrpcStatus.INTERNAL, GrpcStatus.NOT_FOUND, GrpcStatus.INVALID_ARGUMENT, GrpcStatus.DEADLINE_EXCEEDED]) {
        expect(isPluginUnavailable(csiError(code, 'NodeStageVolume'))).toBe(false);
      }
      expect(isPluginUnavailable(new ShutdownError('the agent shuts down'))).toBe(false);
      expect(isPluginUnavailable(new Error('disk full'))).toBe(false);
      expect(isPluginUnavailable(undefined)).toBe(false);
      expect(isPluginUnavailable('UNAVAILABLE')).toBe(false);
    });

    it('looks through the cause chain, up to eight errors deep', () => {
      const wrap = (inner: unknown, times: number): unknown => {
        let e = inner;
        for (let i = 0; i < times; i++) e = new Error(`wrapper ${i}`, { cause: e });
        return e;
      };
      const unavailable = csiError(GrpcStatus.UNAVAILABLE, 'NodePublishVolume', 'connection refused');
      expect(isPluginUnavailable(wrap(unavailable, 1))).toBe(true);
      expect(isPluginUnavailable(wrap(unavailable, 7))).toBe(true); // the eighth error of the chain
      expect(isPluginUnavailable(wrap(unavailable, 8))).toBe(false);
      expect(isPluginUnavailable(wrap(new PluginInstanceNotFoundError('csi-node', 'nfs'), 3))).toBe(true);
      expect(isPluginUnavailable(wrap(csiError(GrpcStatus.INTERNAL, 'NodePublishVolume'), 3))).toBe(false);
      expect(isPluginUnavailable(new Error('outer', { cause: 'UNAVAILABLE' }))).toBe(false);
    });
  });
});
