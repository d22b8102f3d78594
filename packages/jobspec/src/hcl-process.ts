// HCL is parsed in a child process that ends once idle. The converter
// (@cdktn/hcl2json) is HashiCorp's HCL parser compiled from Go to
// WebAssembly: loading it costs ~35 MB that its Go runtime never gives back.
// A worker thread is not enough: its isolate goes, but the allocator keeps
// ~11 MB of what the thread used (measured on the agent's idle RSS). In a
// process of its own every byte goes back when it ends, so an agent that
// read its config (or a demo jobspec) does not carry the parser for the rest
// of its life. The CLI parses jobspecs the same way and sends the agent
// JSON, as Nomad's CLI does.
//
// One process serves every parse that arrives while it lives (a test or a
// CLI run parses many files back to back); it ends IDLE_MS after its last
// answer, and never keeps this process alive on its own.
import { spawn, type ChildProcess } from 'child_process';

/** How long an idle parser process waits for the next parse before it ends. */
export const HCL_PARSER_IDLE_MS = 250;

/** How long one parse may take before its parser is taken for stuck and killed. */
export const HCL_PARSE_LIMIT_MS = 30_000;

/**
 * The parser's code, run with `node -e`, so that it needs no built file
 * beside it (ts-jest runs the sources). Only the converter's own verdict on
 * the text ("parse config: …") is a syntax error; anything else (a stack
 * overflow on absurd nesting) may have left its Go runtime broken, so the
 * process says so and ends, and the next parse gets a fresh one.
 */
const PARSER_SOURCE = `
const { parse } = require(process.env.CSIPLUG_HCL2JSON);
// Its own process group's signals (a terminal's ^C, a SIGHUP to the agent's group) are not its business: it ends with its channel.
process.on('SIGINT', () => undefined);
process.on('SIGHUP', () => undefined);
process.on('message', ({ id, name, text }) => {
  Promise.resolve()
    .then(() => parse(name, text))
    .then(
      (value) => process.send({ id, ok: true, value }),
      (err) => {
        const message = err instanceof Error ? err.message : String(err);
        if (/^parse config: /.test(message)) return process.send({ id, ok: false, message });
        process.send({ id, ok: false, fatal: true, message }, () => process.exit(1));
      },
    );
});
process.on('disconnect', () => process.exit(0));
`;

interface Answer {
  id: number;
  ok: boolean;
  /** The parser failed in a way that is not the text's fault; it ends after this answer. */
  fatal?: boolean;
  value?: unknown;
  message?: string;
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

/** The converter said the HCL is not valid; its message says where. */
export class HclSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HclSyntaxError';
  }
}

class HclParserProcess {
  private child: ChildProcess | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private idleTimer: NodeJS.Timeout | undefined;

  parse(name: string, text: string): Promise<unknown> {
    const child = this.live();
    const id = this.nextId++;
    clearTimeout(this.idleTimer);
    return new Promise<unknown>((resolve, reject) => {
      if (!child.connected || typeof child.send !== 'function') {
        // Spawned without its channel (out of file descriptors): say so, not "send is not a function".
        this.failAll(child, 'could not be started with its channel (is the process out of file descriptors?)');
        reject(new Error('the HCL parser process could not be started with its channel (is the process out of file descriptors?)'));
        return;
      }
      // Held while a parse is under way; an idle parser never holds this process.
      child.ref();
      child.channel?.ref();
      const timer = setTimeout(
        () =>
          this.failAll(
            child,
            `did not answer within ${HCL_PARSE_LIMIT_MS / 1000} s (parsing ${name}, ${text.length} characters); it was stopped`,
          ),
        HCL_PARSE_LIMIT_MS,
      );
      this.pending.set(id, { resolve, reject, timer });
      child.send({ id, name, text }, (err) => {
        if (err) this.failAll(child, `could not be reached: ${err.message}`);
      });
    });
  }

  private live(): ChildProcess {
    if (this.child) return this.child;
    // --liftoff-only: parsing a file never needs the optimised wasm code, and compiling it takes a core for half a second.
    // Its own process group (detached), no stdio, and only the environment it needs (no NODE_OPTIONS: no inspector port, no preloads).
    const child = spawn(process.execPath, ['--liftoff-only', '-e', PARSER_SOURCE], {
      stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
      detached: true,
      env: { CSIPLUG_HCL2JSON: require.resolve('@cdktn/hcl2json'), ...(process.env.PATH !== undefined ? { PATH: process.env.PATH } : {}) },
    });
    child.on('message', (a: Answer) => {
      const p = this.pending.get(a.id);
      if (!p) return;
      this.pending.delete(a.id);
      clearTimeout(p.timer);
      if (a.ok) p.resolve(a.value);
      else if (a.fatal) p.reject(new Error(`the HCL parser failed: ${a.message ?? 'unknown error'}`));
      else p.reject(new HclSyntaxError(a.message ?? 'unknown error'));
      if (a.fatal) this.failAll(child, `failed (${a.message ?? 'unknown error'}) and was stopped`);
      else this.afterAnswer(child);
    });
    // A parser that dies (out of memory, killed) fails what it had, and the next parse starts another.
    child.on('error', (err) => this.failAll(child, `failed: ${err.message}`));
    // Its channel closes before its exit is known: a parse arriving in between must already go to a new parser.
    child.on('disconnect', () => this.failAll(child, 'ended unexpectedly (killed, or out of memory)'));
    child.on('exit', (code, signal) => this.failAll(child, `exited (${signal ?? `code ${code}`})`));
    this.child = child;
    return child;
  }

  private failAll(child: ChildProcess, why: string): void {
    if (this.child !== child) return;
    this.child = undefined;
    clearTimeout(this.idleTimer);
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const p of waiting) {
      clearTimeout(p.timer);
      p.reject(new Error(`the HCL parser process ${why}`));
    }
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }

  private afterAnswer(child: ChildProcess): void {
    if (this.pending.size > 0) return;
    child.unref();
    child.channel?.unref();
    this.idleTimer = setTimeout(() => {
      if (this.child !== child || this.pending.size > 0) return;
      this.child = undefined;
      // Closing the channel ends it (its 'disconnect' handler exits).
      child.disconnect();
    }, HCL_PARSER_IDLE_MS);
    this.idleTimer.unref();
  }
}

const shared = new HclParserProcess();

/** Parses HCL text to plain data in the shared parser process; rejects with HclSyntaxError when the text is not valid HCL. */
export function parseHclText(name: string, text: string): Promise<unknown> {
  return shared.parse(name, text);
}
