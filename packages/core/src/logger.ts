// Structured logging behind the ILogger token. The default writes JSON lines
// through pino; tests bind MemoryLogger to read what was logged.
// pino's types are `export =`: this form keeps the published logger.d.ts
// compiling in a project without esModuleInterop.
import pino = require('pino');
import * as os from 'os';
import { LogSink } from './log-sink';

export type LogFields = Record<string, unknown>;
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

export interface Logger {
  trace(msg: string, fields?: LogFields): void;
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  /** A logger that adds `bindings` to every line. */
  child(bindings: LogFields): Logger;
}

export interface PinoLoggerOptions {
  level?: LogLevel | 'silent';
  name?: string;
  /** Where lines go; defaults to stderr, through a LogSink (a line stderr refuses is dropped and counted, never retried). */
  destination?: pino.DestinationStream;
  /** `json` (default): one JSON object per line; `human`: `time LEVEL [component] message key=value…`, an error's stack only at debug. */
  format?: 'json' | 'human';
}

const LEVEL_NAMES: Readonly<Record<number, string>> = Object.freeze({
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
});
/** Fields of a pino line that the human format shows in its own place, or not at all. */
const HEADER_FIELDS = new Set(['level', 'time', 'msg', 'component']);

/** A string as a log line may show it: as it is when it is plain printable ASCII with no quote or `=`, else JSON-escaped (no newline, no control character reaches the terminal). */
function safeText(v: string, bare: RegExp = /^[\x21-\x7e]+$/): string {
  return bare.test(v) && !/["=]/.test(v) ? v : JSON.stringify(v);
}

function humanValue(v: unknown, stacks: boolean): string {
  if (v !== null && typeof v === 'object' && typeof (v as { message?: unknown }).message === 'string' && 'stack' in (v as object)) {
    const e = v as { message: string; stack?: string; code?: unknown };
    const text = `${e.message}${e.code !== undefined ? ` (${String(e.code)})` : ''}`;
    return JSON.stringify(stacks && e.stack ? `${text}\n${e.stack}` : text);
  }
  if (typeof v === 'string') return safeText(v);
  return typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v);
}

/**
 * One pino JSON line as a line for people: `2026-12-01T13:52:58.123Z WARN
 * [agent] the message key=value …`. An error's stack only when `stacks`
 * (the debug level or below).
 */
export function humanLogLine(json: string, stacks: boolean): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const time = typeof o.time === 'number' ? new Date(o.time).toISOString() : new Date().toISOString();
  const level = (LEVEL_NAMES[Number(o.level)] ?? String(o.level)).padEnd(5);
  const component = typeof o.component === 'string' ? ` [${safeText(o.component)}]` : '';
  const fields = Object.entries(o)
    .filter(([k, v]) => !HEADER_FIELDS.has(k) && v !== undefined)
    .map(([k, v]) => `${k}=${humanValue(v, stacks)}`);
  // The message as it is when it is printable (spaces too); escaped when it holds a line break or a control character.
  const msg = String(o.msg ?? '');
  const text = /^[\x20-\x7e\u00a0-\uffff]*$/.test(msg) && !/[\u2028\u2029\u0085]/.test(msg) ? msg : JSON.stringify(msg);
  return `${time} ${level}${component} ${text}${fields.length ? `  ${fields.join(' ')}` : ''}\n`;
}

/** Keys pino writes on every line itself; a caller's field of the same name is written as `field.<key>`. */
const PINO_OWN_KEYS: ReadonlySet<string> = new Set(['level', 'time', 'msg']);

/**
 * One line's fields: the logger's bindings, then the call's fields (a field
 * wins over a binding of the same name, a child's binding over its
 * parent's), errors made plain. One object, so each key is written once:
 * pino writes a child's bindings and a call's fields side by side and
 * repeats a key both hold (`component` of a child of a child, a caller's
 * `name` beside the logger's).
 */
function lineFields(bindings: LogFields, fields?: LogFields): LogFields {
  const out: LogFields = { ...bindings };
  for (const [k, v] of Object.entries(fields ?? {}))
    out[k] = v instanceof Error ? { message: v.message, code: (v as { code?: unknown }).code, stack: v.stack } : v;
  for (const k of PINO_OWN_KEYS) {
    if (k in out) {
      out[`field.${k}`] = out[k];
      delete out[k];
    }
  }
  return out;
}

const LEVEL_RANK: Readonly<Record<LogLevel | 'silent', number>> = Object.freeze({
  trace: 10,
  debug: 20,
  info: 30,
  warn: 40,
  error: 50,
  silent: Infinity,
});

export class PinoLogger implements Logger {
  /** The root pino logger, without bindings: this logger's own are merged into each line (see lineFields). */
  private readonly log: pino.Logger;
  /** Fields on every line of this logger: pid, hostname and name for JSON lines, then each child's bindings. */
  private readonly bindings: LogFields;
  /** The level, shared by this logger and every child made from it: setLevel on the root changes them all. */
  private readonly threshold: { level: LogLevel | 'silent' };

  constructor(options: PinoLoggerOptions | pino.Logger = {}, threshold?: { level: LogLevel | 'silent' }, bindings: LogFields = {}) {
    if (typeof (options as pino.Logger).child === 'function') {
      this.log = options as pino.Logger;
      this.threshold = threshold ?? { level: 'trace' };
      this.bindings = bindings;
    } else {
      const o = options as PinoLoggerOptions;
      const shared = threshold ?? { level: o.level ?? 'info' };
      // For people: each JSON line pino makes is rewritten as one readable line (stacks only at debug and below).
      const forPeople = (line: string): string => humanLogLine(line, LEVEL_RANK[shared.level] <= LEVEL_RANK.debug);
      // Not pino.destination: it retries a write the disk refuses every 100 ms for ever (a full disk wedged the agent).
      const out =
        o.destination ??
        new LogSink(2, (dropped, error) => {
          const json = JSON.stringify({
            level: 40,
            time: Date.now(),
            ...(o.format === 'human' ? {} : { name: o.name ?? 'csiplug' }),
            msg: `${dropped} log line(s) could not be written to stderr (${error}) and were dropped; logging works again`,
            dropped,
            error,
          });
          return o.format === 'human' ? forPeople(json) : `${json}\n`;
        });
      const dest: pino.DestinationStream = o.format === 'human' ? { write: (line: string) => void out.write(forPeople(line)) } : out;
      // pino itself passes everything; the shared threshold decides, so a level change reaches children made earlier.
      // No base of pino's: pid, host and logger name are bindings like any other (so a caller's `name` replaces the logger's, not repeats it).
      // For people, none of them: a caller's `name` or `pid` field is shown as the caller meant it.
      this.log = pino({ level: 'trace', base: null }, dest);
      this.bindings =
        o.format === 'human' ? { ...bindings } : { pid: process.pid, hostname: os.hostname(), name: o.name ?? 'csiplug', ...bindings };
      this.threshold = shared;
    }
  }

  /** The level now (shared with every child of this logger). */
  get level(): LogLevel | 'silent' {
    return this.threshold.level;
  }

  /** Changes the level of this logger and of every child made from it, at once (a config reload). */
  setLevel(level: LogLevel | 'silent'): void {
    if (!(level in LEVEL_RANK)) throw new Error(`unknown log level "${String(level)}"`);
    this.threshold.level = level;
  }

  private on(level: LogLevel): boolean {
    return LEVEL_RANK[level] >= LEVEL_RANK[this.threshold.level];
  }

  trace(msg: string, fields?: LogFields): void {
    if (this.on('trace')) this.log.trace(lineFields(this.bindings, fields), msg);
  }
  debug(msg: string, fields?: LogFields): void {
    if (this.on('debug')) this.log.debug(lineFields(this.bindings, fields), msg);
  }
  info(msg: string, fields?: LogFields): void {
    if (this.on('info')) this.log.info(lineFields(this.bindings, fields), msg);
  }
  warn(msg: string, fields?: LogFields): void {
    if (this.on('warn')) this.log.warn(lineFields(this.bindings, fields), msg);
  }
  error(msg: string, fields?: LogFields): void {
    if (this.on('error')) this.log.error(lineFields(this.bindings, fields), msg);
  }
  child(bindings: LogFields): Logger {
    return new PinoLogger(this.log, this.threshold, { ...this.bindings, ...bindings });
  }
}

export interface LogRecord {
  level: LogLevel;
  msg: string;
  fields: LogFields;
}

/** Keeps every line in memory; for tests that assert what was logged. */
export class MemoryLogger implements Logger {
  constructor(
    readonly records: LogRecord[] = [],
    private readonly bindings: LogFields = {},
  ) {}

  private push(level: LogLevel, msg: string, fields?: LogFields): void {
    this.records.push({ level, msg, fields: { ...this.bindings, ...(fields ?? {}) } });
  }
  trace(msg: string, fields?: LogFields): void {
    this.push('trace', msg, fields);
  }
  debug(msg: string, fields?: LogFields): void {
    this.push('debug', msg, fields);
  }
  info(msg: string, fields?: LogFields): void {
    this.push('info', msg, fields);
  }
  warn(msg: string, fields?: LogFields): void {
    this.push('warn', msg, fields);
  }
  error(msg: string, fields?: LogFields): void {
    this.push('error', msg, fields);
  }
  child(bindings: LogFields): Logger {
    return new MemoryLogger(this.records, { ...this.bindings, ...bindings });
  }
  /** Lines at `level` or above whose message contains `text`. */
  find(text: string, level?: LogLevel): LogRecord[] {
    return this.records.filter((r) => r.msg.includes(text) && (!level || r.level === level));
  }
}

/** Discards everything. */
export class NullLogger implements Logger {
  trace(): void {}
  debug(): void {}
  info(): void {}
  warn(): void {}
  error(): void {}
  child(_bindings?: LogFields): Logger {
    return this;
  }
}
