// Which status a service error becomes, including a plugin's own answer
// wrapped by the catalog.
import { ConflictError, CsiplugError, ShutdownError, ValidationError } from '@csiplug/core';
import { CSIError } from '@csiplug/csi';
import { VolumePluginError } from '@csiplug/volumes';
import { ApiError, statusForError } from './api-error';
import { NotFoundError } from './service-errors';

function pluginSaid(grpcCode: number, local = false): VolumePluginError {
  const cause = new CSIError({ grpcCode, method: 'CreateVolume', endpoint: 'unix:///p/csi.sock', details: 'the plugin says so', local });
  return new VolumePluginError('vol1', 'hostpath', `could not create volume "vol1" on plugin "hostpath": ${cause.message}`, { cause });
}

describe('statusForError', () => {
  it.each<[string, number, number]>([
    ['INVALID_ARGUMENT', 3, 400],
    ['NOT_FOUND', 5, 404],
    ['ALREADY_EXISTS', 6, 409],
    ['FAILED_PRECONDITION', 9, 409],
    ['ABORTED', 10, 409],
    ['OUT_OF_RANGE', 11, 400],
    ['UNIMPLEMENTED', 12, 501],
    ['INTERNAL', 13, 500],
    ['UNAVAILABLE', 14, 500],
    ['RESOURCE_EXHAUSTED', 8, 409],
  ])('maps a plugin answer of %s (wrapped by the catalog) to %i', (_name, code, status) => {
    expect(statusForError(pluginSaid(code))).toBe(status);
  });

  it('maps a bare CSI error the same way', () => {
    expect(statusForError(new CSIError({ grpcCode: 3, method: 'CreateVolume', endpoint: 'x', details: 'bad' }))).toBe(400);
  });

  it('does not read a call refused on our side as the caller’s fault', () => {
    expect(statusForError(pluginSaid(3, true))).toBe(500);
  });

  it('keeps the statuses it had', () => {
    expect(statusForError(new ApiError(403, 'EFORBIDDEN', 'no'))).toBe(403);
    expect(statusForError(new ValidationError('bad', 'x'))).toBe(400);
    expect(statusForError(new CsiplugError('EVOLUME_IN_USE', 'busy'))).toBe(409);
    expect(statusForError(new CsiplugError('EPLUGIN_NOT_FOUND', 'gone'))).toBe(404);
    expect(statusForError(new Error('boom'))).toBe(500);
  });

  // The cluster's own errors (ClusterJobsUnavailableError, ClusterVolumeExistsError, NodeNameInUseError…) are checked in
  // @csiplug/cluster (cluster-error-status.spec.ts): the cluster sits above the API.
  it('gives the errors that once carried an httpStatus the same status, by their codes', () => {
    expect(statusForError(new NotFoundError('job "j" not found'))).toBe(404);
    expect(statusForError(new ConflictError('job "j" kept changing'))).toBe(409);
    expect(statusForError(new ShutdownError('the agent is shutting down'))).toBe(503);
    expect(statusForError(new CsiplugError('ENODE_NOT_FOUND', 'node purge: no such node'))).toBe(404);
    expect(statusForError(new CsiplugError('ENODE_PURGE_REFUSED', 'node purge: the node is live'))).toBe(409);
    expect(statusForError(Object.assign(new Error('x'), { httpStatus: 418 }))).toBe(500);
  });

  it('survives a cause cycle', () => {
    const a = new CsiplugError('EX', 'a') as CsiplugError & { cause: unknown };
    Object.defineProperty(a, 'cause', { value: a });
    expect(statusForError(a)).toBe(500);
  });
});
