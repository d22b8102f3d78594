import { Writable } from 'stream';
import { MemoryLogger, NullLogger, PinoLogger } from './logger';

describe('loggers', () => {
  it('MemoryLogger keeps lines with child bindings', () => {
    const log = new MemoryLogger();
    log.child({ plugin: 'hostpath' }).warn('probe failed', { attempt: 2 });
    log.info('hello');
    expect(log.find('probe failed', 'warn')[0]!.fields).toEqual({ plugin: 'hostpath', attempt: 2 });
    expect(log.records).toHaveLength(2);
  });

  it('PinoLogger writes JSON lines with fields and error details', () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const log = new PinoLogger({ level: 'debug', destination }).child({ component: 'test' });
    log.debug('with fields', { n: 1 });
    log.error('failed', { error: Object.assign(new Error('boom'), { code: 'EX' }) });
    const parsed = lines.map((l) => JSON.parse(l));
    expect(parsed[0]).toMatchObject({ msg: 'with fields', n: 1, component: 'test', level: 20 });
    expect(parsed[1]).toMatchObject({ msg: 'failed', error: { message: 'boom', code: 'EX' } });
  });

  it('NullLogger discards', () => {
    const log = new NullLogger();
    expect(() => log.child({}).error('x')).not.toThrow();
  });
});
