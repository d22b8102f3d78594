import { CSIError, GrpcStatus, grpcCodeName, isNotFound, isRetryable, isUnimplemented } from './errors';

describe('CSIError', () => {
  const make = (grpcCode: number, extra: Partial<ConstructorParameters<typeof CSIError>[0]> = {}) =>
    new CSIError({ grpcCode, method: 'NodePublishVolume', endpoint: 'unix:///p/csi.sock', details: 'plugin says no', ...extra });

  it('classifies by code', () => {
    expect(isNotFound(make(GrpcStatus.NOT_FOUND))).toBe(true);
    expect(isNotFound(new Error('NOT_FOUND'))).toBe(false);
    expect(isRetryable(make(GrpcStatus.ABORTED))).toBe(true);
    expect(isRetryable(make(GrpcStatus.NOT_FOUND))).toBe(false);
    expect(isRetryable(make(GrpcStatus.INTERNAL), [GrpcStatus.INTERNAL])).toBe(true);
    expect(isUnimplemented(make(GrpcStatus.UNIMPLEMENTED))).toBe(true);
  });

  it('says what failed, where, and what to do', () => {
    expect(make(GrpcStatus.UNAVAILABLE, { attempts: 3 }).message).toMatch(
      /NodePublishVolume.*unix:\/\/\/p\/csi.sock.*not reachable.*after 3 attempts.*running/,
    );
    expect(make(GrpcStatus.DEADLINE_EXCEEDED, { timeoutMs: 5000 }).message).toMatch(/no answer.*within 5000 ms.*hung/);
    expect(make(GrpcStatus.UNIMPLEMENTED).message).toMatch(/does not implement CSI NodePublishVolume/);
    expect(make(GrpcStatus.INVALID_ARGUMENT, { local: true, details: 'target_path is required' }).message).toBe(
      'CSI NodePublishVolume not sent to plugin at unix:///p/csi.sock: target_path is required',
    );
    expect(grpcCodeName(99)).toBe('CODE_99');
  });
});
