// The HTTP status the API gives each of the cluster's errors, by its code
// (statusForError in @csiplug/api): the cluster sits above the API, so the
// check of its errors lives here.
import { statusForError } from '@csiplug/api';
import { ClusterJobsUnavailableError, ClusterVolumeExistsError, NodeNameHeldError, NodeNameInUseError } from './index';

describe('statusForError of the cluster errors', () => {
  it('gives the errors that once carried an httpStatus the same status, by their codes', () => {
    expect(statusForError(new ClusterJobsUnavailableError('job "j"', new Error('etcd away')))).toBe(503);
    expect(statusForError(new ClusterVolumeExistsError('v1', 'n1'))).toBe(409);
    expect(statusForError(new NodeNameInUseError('n1', 'i-2'))).toBe(409);
    expect(statusForError(new NodeNameHeldError('n1', 'i-2', 'i-1', 1, 0))).toBe(409);
  });
});
