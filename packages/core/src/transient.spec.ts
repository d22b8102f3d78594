import { isTransientFsError, TRANSIENT_FS_ERROR_CODES } from './transient';

/** An error as node's fs and child_process calls make them: a message and an errno `code`. */
const fault = (code: string) => Object.assign(new Error(`${code}: failed, open '/proc/1/stat'`), { code });

describe('isTransientFsError', () => {
  it('is true for every errno of a fault of this process', () => {
    expect([...TRANSIENT_FS_ERROR_CODES].sort()).toEqual(['EAGAIN', 'EBUSY', 'EINTR', 'EMFILE', 'ENFILE', 'ENOMEM']);
    for (const code of TRANSIENT_FS_ERROR_CODES) expect(isTransientFsError(fault(code))).toBe(true);
  });

  it('finds the fault down a chain of causes', () => {
    const wrapped = new Error('could not start task', { cause: new Error('could not read record', { cause: fault('EMFILE') }) });
    expect(isTransientFsError(wrapped)).toBe(true);
  });

  it('is false for errors about what was looked at, for non-errors, and for a cycle of causes', () => {
    for (const err of [fault('ENOENT'), fault('EACCES'), fault('ESRCH'), new Error('x'), undefined, null, 'EMFILE', { code: 24 }])
      expect(isTransientFsError(err)).toBe(false);
    const a: { code: string; cause?: unknown } = { code: 'EPERM' };
    a.cause = { code: 'EIO', cause: a };
    expect(isTransientFsError(a)).toBe(false);
  });
});
