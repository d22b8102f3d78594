import { AbortError, CsiplugError, ShutdownError, TimeoutError, ValidationError, errorMessage } from './errors';
import { abortReason, raceAbort, throwIfAborted } from './abort';
import { assertPathSafeId, isPathSafeId } from './ids';
import { sameStringMap } from './records';

describe('errors', () => {
  it('carry a stable code, their class name and a cause', () => {
    const cause = new Error('low level');
    const err = new TimeoutError('waited 5s for plugin x', 5000, { cause });
    expect(err).toBeInstanceOf(CsiplugError);
    expect(err.code).toBe('ETIMEOUT');
    expect(err.name).toBe('TimeoutError');
    expect(err.cause).toBe(cause);
    expect(err.timeoutMs).toBe(5000);
    expect(new AbortError().code).toBe('EABORTED');
    expect(new ShutdownError('x').code).toBe('ESHUTDOWN');
    expect(new ValidationError('bad', 'field').field).toBe('field');
    expect(errorMessage('plain')).toBe('plain');
  });
});

describe('abort helpers', () => {
  it('throwIfAborted uses the reason when it is an Error, else AbortError', () => {
    const ac = new AbortController();
    expect(() => throwIfAborted(ac.signal)).not.toThrow();
    ac.abort();
    expect(() => throwIfAborted(ac.signal)).toThrow(AbortError);
    const ac2 = new AbortController();
    ac2.abort(new ShutdownError('agent stopping'));
    expect(abortReason(ac2.signal)).toBeInstanceOf(ShutdownError);
  });

  it('raceAbort settles with the promise or rejects on abort', async () => {
    await expect(raceAbort(Promise.resolve(1))).resolves.toBe(1);
    const ac = new AbortController();
    const never = new Promise<number>(() => undefined);
    const p = raceAbort(never, ac.signal);
    ac.abort();
    await expect(p).rejects.toBeInstanceOf(AbortError);
    await expect(raceAbort(Promise.reject(new Error('x')), new AbortController().signal)).rejects.toThrow('x');
    await expect(raceAbort(Promise.resolve(1), ac.signal)).rejects.toBeInstanceOf(AbortError);
  });
});

describe('path-safe ids', () => {
  // db[0]: a per_alloc volume id (Nomad's source[index]) is one path component too.
  it.each(['alloc-1', 'a.b', 'vol_1', 'db[0]', 'db[12]', 'x'.repeat(255)])('accepts %p', (id) => {
    expect(isPathSafeId(id)).toBe(true);
  });
  it.each(['', '.', '..', 'a/b', 'a\0b', '../etc', 'x'.repeat(256), 42])('rejects %p naming the id', (id) => {
    expect(isPathSafeId(id)).toBe(false);
    expect(() => assertPathSafeId(id, 'volume id')).toThrow(/volume id/);
  });
  it.each(['a\nb', 'a\rb', 'job\u001b[2J', 'tab\there', 'del\u007f', 'c1\u0085', 'ls\u2028'])(
    'rejects control characters in %p, saying which and where',
    (id) => {
      expect(isPathSafeId(id)).toBe(false);
      expect(() => assertPathSafeId(id, 'job id')).toThrow(
        /job id may not contain control characters \(found U\+[0-9A-F]{4} at position \d+\)/,
      );
    },
  );
  it('accepts other unicode', () => {
    expect(isPathSafeId('données-ü-日本')).toBe(true);
  });
});

describe('sameStringMap', () => {
  it('compares by value in any key order', () => {
    expect(sameStringMap({ a: '1', b: '2' }, { b: '2', a: '1' })).toBe(true);
    expect(sameStringMap({ a: '1' }, { a: '2' })).toBe(false);
    expect(sameStringMap({ a: '1' }, { a: '1', b: '2' })).toBe(false);
    expect(sameStringMap(undefined, {})).toBe(true);
    expect(sameStringMap({ toString: 'x' }, {})).toBe(false);
  });
});
