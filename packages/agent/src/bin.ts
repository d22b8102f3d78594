#!/usr/bin/env node
// The `csiplug` executable: runs main() with this process's arguments and
// streams, and the agent/demo handlers from handlers.ts.
//
// The HCL parser (@cdktn/hcl2json) is a Go program compiled to WebAssembly,
// several MB of it, loaded to parse one config or jobspec. V8 compiles it
// twice by default: at once with its baseline compiler (Liftoff), then all
// over again with its optimizing one, in background threads that take the
// other core of a small node. Parsing a file never needs the optimized
// code: Liftoff alone saves about half a second of CPU per agent start.
// Wasm flags are read when a module is compiled, so setting this before
// anything loads the parser is enough.
//
// The young generation stays at its starting size (semi-space growth factor
// 1) instead of growing to 16 MB a half: an agent allocates little once it
// runs, and the grown space would stay resident for its whole life. The
// cost is more frequent young-generation collections in a burst of work (a
// restore of many allocs), each of them short. With it an idle agent holds
// about 6 MB less (bench/restart's idle row).
import { setFlagsFromString } from 'v8';
setFlagsFromString('--liftoff-only');
setFlagsFromString('--semi-space-growth-factor=1');
import 'reflect-metadata';
import { errorMessage } from '@csiplug/core';
import { defaultHandlers } from './commands/handlers';
import { main } from '@csiplug/cli';

// A write to stdout or stderr that fails (their file's disk is full, a
// closed pipe) loses that text, never the process: without a listener the
// stream's 'error' would end the agent, tasks' parent and API with it. The
// logger counts and says what it dropped (LogSink).
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);

main(
  process.argv.slice(2),
  { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd(), stdin: process.stdin },
  defaultHandlers(),
).then(
  (code) => {
    process.exitCode = code;
    leaveSoon();
  },
  (err: unknown) => {
    process.stderr.write(`Error: ${errorMessage(err)}\n`);
    process.exitCode = 1;
    leaveSoon();
  },
);

/**
 * The command is done: whatever still holds the event loop (a socket or
 * timer some failure left behind) must not keep the process — above all an
 * agent that was told to stop — alive. The timer itself holds nothing.
 */
function leaveSoon(): void {
  setTimeout(() => process.exit(), 2_000).unref();
}
