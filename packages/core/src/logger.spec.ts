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

  it('PinoLogger for people: one line each, time, level, component, fields; an error stack only at debug; setLevel reaches children made earlier', () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const root = new PinoLogger({ level: 'info', destination, format: 'human' });
    const log = root.child({ component: 'agent' });
    log.debug('not shown');
    log.warn('plugin became unhealthy', { plugin: 'hostpath', why: 'probe failed twice', error: Object.assign(new Error('boom'), { code: 'EX' }) });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z WARN  \[agent\] plugin became unhealthy  plugin=hostpath why="probe failed twice" error="boom \(EX\)"\n$/);
    root.setLevel('debug');
    log.debug('now shown', { error: new Error('with stack') });
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/DEBUG \[agent\] now shown  error="with stack\\nError: with stack\\n    at /);
    expect(lines.every((l) => l.split('\n').length === 2)).toBe(true);
    // A caller's name and pid are shown; a newline or control character never reaches the terminal raw.
    log.warn('fingerprint failed\nsecond line', { name: 'hostpath', pid: 42, error: 'boom\u001b]0;pwned\u0007' });
    expect(lines[2]).toMatch(/\[agent\] "fingerprint failed\\nsecond line"  name=hostpath pid=42 error="boom\\u001b\]0;pwned\\u0007"\n$/);
  });

  it('NullLogger discards', () => {
    const log = new NullLogger();
    expect(() => log.child({}).error('x')).not.toThrow();
  });
});
