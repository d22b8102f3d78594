import { Writable } from 'stream';
import { MemoryLogger, NullLogger, PinoLogger } from './logger';

/**
 * Every key that one JSON object of `text` holds twice, as `path.key`: read
 * from the raw text, since JSON.parse keeps the last of two equal keys and
 * so cannot show them.
 */
function duplicateKeys(text: string): string[] {
  const found: string[] = [];
  let i = 0;
  const ws = (): void => {
    while (/\s/.test(text[i] ?? '')) i++;
  };
  const str = (): string => {
    const start = i;
    i++;
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  const value = (where: string): void => {
    ws();
    if (text[i] === '{') {
      i++;
      const keys = new Set<string>();
      for (ws(); text[i] !== '}'; ws()) {
        if (text[i] === ',') i++;
        ws();
        const key = str();
        if (keys.has(key)) found.push(`${where}${key}`);
        keys.add(key);
        ws();
        i++; // the colon
        value(`${where}${key}.`);
      }
      i++;
    } else if (text[i] === '[') {
      i++;
      for (ws(); text[i] !== ']'; ws()) {
        if (text[i] === ',') i++;
        value(where);
      }
      i++;
    } else if (text[i] === '"') {
      str();
    } else {
      while (i < text.length && !/[,}\]\s]/.test(text[i]!)) i++;
    }
  };
  value('');
  return found;
}

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
    log.warn('plugin became unhealthy', {
      plugin: 'hostpath',
      why: 'probe failed twice',
      error: Object.assign(new Error('boom'), { code: 'EX' }),
    });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z WARN  \[agent\] plugin became unhealthy  plugin=hostpath why="probe failed twice" error="boom \(EX\)"\n$/,
    );
    root.setLevel('debug');
    log.debug('now shown', { error: new Error('with stack') });
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/DEBUG \[agent\] now shown  error="with stack\\nError: with stack\\n    at /);
    expect(lines.every((l) => l.split('\n').length === 2)).toBe(true);
    // A caller's name and pid are shown; a newline or control character never reaches the terminal raw.
    log.warn('fingerprint failed\nsecond line', { name: 'hostpath', pid: 42, error: 'boom\u001b]0;pwned\u0007' });
    expect(lines[2]).toMatch(/\[agent\] "fingerprint failed\\nsecond line"  name=hostpath pid=42 error="boom\\u001b\]0;pwned\\u0007"\n$/);
  });

  it('duplicateKeys finds a key an object holds twice, at any depth, and only then', () => {
    expect(duplicateKeys('{"a":1,"b":{"c":"x\\"}","c":[1,{"d":2,"d":3}]},"a":{}}')).toEqual(['b.c', 'b.c.d', 'a']);
    expect(duplicateKeys('{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}')).toEqual([]);
  });

  it('PinoLogger writes each key once per JSON line: nested children, a field named like a binding, the logger name or a pino key', () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const root = new PinoLogger({ level: 'info', destination, name: 'csiplug' });
    const log = root.child({ component: 'agent', alloc: 'a1' }).child({ component: 'runner' });
    log.info('started', { name: 'hostpath', alloc: 'a2', msg: 'a field named msg', time: 7, level: 'x' });
    root.info('plain');
    expect(lines).toHaveLength(2);
    for (const line of lines) expect(duplicateKeys(line)).toEqual([]);
    // The nearest wins: a field over a child's binding, a child's binding over its parent's, a caller's name over the logger's.
    expect(JSON.parse(lines[0]!)).toMatchObject({
      level: 30,
      msg: 'started',
      component: 'runner',
      name: 'hostpath',
      alloc: 'a2',
      'field.msg': 'a field named msg',
      'field.time': 7,
      'field.level': 'x',
    });
    expect(JSON.parse(lines[1]!)).toMatchObject({ msg: 'plain', name: 'csiplug', pid: process.pid });
    expect(typeof JSON.parse(lines[0]!).time).toBe('number');
  });

  it('NullLogger discards', () => {
    const log = new NullLogger();
    expect(() => log.child({}).error('x')).not.toThrow();
  });
});
