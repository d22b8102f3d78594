// SharedWork's rules on their own: callers of one key share one run and its
// events; the work stops only when every caller left; work that is stopping
// is never joined and its end never removes its replacement; work every
// caller gave up on before its turn never starts; the log names the work by
// its label, never by its key (the puller's key holds an identity of the
// credentials).
import { MemoryLogger } from '@csiplug/core';
import { SharedWork } from './shared-work';

const deferred = <T>() => {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
};

describe('SharedWork', () => {
  it('runs the work once for the callers of one key, each getting its events', async () => {
    const work = new SharedWork<string, number>(new MemoryLogger(), 'pull');
    const done = deferred<number>();
    let starts = 0;
    const seen: string[] = [];
    const start = async (_s: AbortSignal, emit: (e: string) => void) => {
      starts++;
      emit('half');
      return done.promise;
    };
    const a = work.run('k', { onProgress: (e) => seen.push(`a ${e}`) }, start);
    const b = work.run('k', { onProgress: (e) => seen.push(`b ${e}`) }, start);
    await Promise.resolve();
    done.resolve(7);
    await expect(Promise.all([a, b])).resolves.toEqual([7, 7]);
    expect(starts).toBe(1);
    expect(seen).toEqual(['a half', 'b half']);
  });

  it('stops the work only when every caller gave up; a later caller starts anew and the old end leaves it shared', async () => {
    const work = new SharedWork<string, number>(new MemoryLogger(), 'pull');
    const runs: Array<{ signal: AbortSignal; end: ReturnType<typeof deferred<number>> }> = [];
    const start = (signal: AbortSignal) => {
      const end = deferred<number>();
      runs.push({ signal, end });
      return end.promise;
    };
    const one = new AbortController();
    const two = new AbortController();
    const a = work.run('k', { signal: one.signal }, start);
    const b = work.run('k', { signal: two.signal }, start);
    await Promise.resolve();
    one.abort(new Error('a left'));
    await expect(a).rejects.toThrow('a left');
    expect(runs[0]!.signal.aborted).toBe(false); // b still waits
    two.abort(new Error('b left'));
    await expect(b).rejects.toThrow('b left');
    expect(runs[0]!.signal.aborted).toBe(true);
    // The stopped run has not ended yet (it cleans up): a new caller is not joined to it.
    const c = work.run('k', {}, start);
    await Promise.resolve();
    expect(runs).toHaveLength(2);
    runs[0]!.end.reject(runs[0]!.signal.reason);
    await Promise.resolve();
    expect(work.running('k')).toBeDefined(); // the old end did not remove c's run
    const d = work.run('k', {}, start);
    runs[1]!.end.resolve(3);
    await expect(Promise.all([c, d])).resolves.toEqual([3, 3]);
    expect(runs).toHaveLength(2);
  });

  it('never starts work every caller gave up on before its turn', async () => {
    const work = new SharedWork<string, number>(new MemoryLogger(), 'archive load');
    let starts = 0;
    const gaveUp = new AbortController();
    const a = work.run('k', { signal: gaveUp.signal }, async () => (starts++, 1));
    gaveUp.abort(new Error('stopped'));
    await expect(a).rejects.toThrow('stopped');
    await new Promise((r) => setImmediate(r));
    expect(starts).toBe(0);
  });

  it('logs a listener that throws by the work and its label, never its key', async () => {
    const logger = new MemoryLogger();
    const work = new SharedWork<string, number>(logger, 'pull');
    const key = 'registry.example/app:1 3f1c0a9e-credentials-identity';
    const result = work.run(
      key,
      {
        onProgress: () => {
          throw new Error('listener bug');
        },
      },
      async (_s, emit) => (emit('x'), 1),
      'registry.example/app:1',
    );
    await expect(result).resolves.toBe(1);
    expect(logger.records).toEqual([
      { level: 'warn', msg: 'a progress listener threw', fields: { work: 'pull', of: 'registry.example/app:1', error: 'listener bug' } },
    ]);
    expect(JSON.stringify(logger.records)).not.toContain('credentials-identity');
  });

  it('abortAll stops every run under way, failing its callers', async () => {
    const work = new SharedWork<string, number>(new MemoryLogger(), 'archive load');
    const a = work.run('k', {}, (signal) => new Promise((_r, reject) => signal.addEventListener('abort', () => reject(signal.reason))));
    await Promise.resolve();
    work.abortAll(new Error('the archive loader was disposed'));
    await expect(a).rejects.toThrow('the archive loader was disposed');
    expect(work.running('k')).toBeUndefined();
  });
});
