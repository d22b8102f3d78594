// The volume reconciler's errors (errors.ts): the code and message of a
// failed mount (with and without its plugin), of a stopped reconciler and of
// a remount refused because its target is in use, and isTargetBusy's reading
// of an unpublish's failure — umount's words, the errno code, and causes
// followed a few levels down.
import { ShutdownError } from '@csiplug/core';
import { ReconcilerStoppedError, RemountBusyError, VolumeMountError, isTargetBusy } from './errors';

describe('VolumeMountError', () => {
  test('names the volume, its id and its plugin, then the cause', () => {
    const cause = new Error('NodeStageVolume: deadline exceeded');
    const err = new VolumeMountError('data', 'vol1', 'hostpath', cause);
    expect(err).toMatchObject({
      name: 'VolumeMountError',
      code: 'EVOLUME_MOUNT',
      volumeName: 'data',
      volumeId: 'vol1',
      pluginId: 'hostpath',
      message: 'volume "data" (vol1) on plugin hostpath: NodeStageVolume: deadline exceeded',
    });
    expect(err.cause).toBe(cause);
  });

  test('without a plugin (none known yet, or empty), says nothing of one; a cause that is not an Error is shown as a string', () => {
    expect(new VolumeMountError('data', 'vol1', undefined, 'no such volume').message).toBe('volume "data" (vol1): no such volume');
    const err = new VolumeMountError('data', 'vol1', '', 42);
    expect(err.message).toBe('volume "data" (vol1): 42');
    expect(err.cause).toBe(42);
    expect(err.pluginId).toBe('');
  });
});

describe('ReconcilerStoppedError', () => {
  test('is a ShutdownError saying the agent is shutting down', () => {
    const err = new ReconcilerStoppedError();
    expect(err).toBeInstanceOf(ShutdownError);
    expect(err).toMatchObject({
      name: 'ReconcilerStoppedError',
      code: 'ESHUTDOWN',
      message: 'the volume reconciler is stopped; the agent is shutting down',
    });
  });
});

describe('RemountBusyError', () => {
  test('names the target and the cause, and says what to do', () => {
    const cause = new Error('umount: /t: target is busy.');
    const err = new RemountBusyError('/t', cause);
    expect(err).toMatchObject({
      name: 'RemountBusyError',
      code: 'EREMOUNT_BUSY',
      target: '/t',
      message: '/t is in use, so it was not unmounted for a remount: umount: /t: target is busy.; stop what holds it, or restart the alloc',
    });
    expect(err.cause).toBe(cause);
  });
});

describe('isTargetBusy', () => {
  test.each([
    'EBUSY',
    'unmount failed: EBUSY: resource busy',
    'umount: /t: target is busy.',
    'umount: /t: Target Is Busy',
    'Device or resource busy',
    'rpc error: code = Internal desc = device or resource busy',
  ])('words of a target in use: %j', (message) => {
    expect(isTargetBusy(new Error(message))).toBe(true);
    expect(isTargetBusy(message)).toBe(true);
  });

  test.each(['NOTEBUSY', 'EBUSYNESS', 'target is not mounted', 'device or resource is free', '', 'busy'])('other words: %j', (message) => {
    expect(isTargetBusy(new Error(message))).toBe(false);
  });

  test('an errno code EBUSY, whatever the message', () => {
    expect(isTargetBusy(Object.assign(new Error('unmount failed'), { code: 'EBUSY' }))).toBe(true);
    expect(isTargetBusy(Object.assign(new Error('unmount failed'), { code: 'ENOENT' }))).toBe(false);
  });

  test('nothing at all is not busy', () => {
    expect(isTargetBusy(undefined)).toBe(false);
    expect(isTargetBusy(null)).toBe(false);
  });

  test('looks through causes, down to the fifth error of the chain', () => {
    const chain = (depth: number, last: unknown): unknown => {
      let e = last;
      for (let i = 1; i < depth; i++) e = new Error(`wrapper ${i}`, { cause: e });
      return e;
    };
    expect(isTargetBusy(chain(2, new Error('target is busy')))).toBe(true);
    expect(isTargetBusy(chain(5, new Error('target is busy')))).toBe(true);
    expect(isTargetBusy(chain(5, Object.assign(new Error('x'), { code: 'EBUSY' })))).toBe(true);
    expect(isTargetBusy(chain(6, new Error('target is busy')))).toBe(false);
    // A chain that ends (a cause of null) is not busy.
    expect(isTargetBusy(new Error('wrapper', { cause: null }))).toBe(false);
  });
});
