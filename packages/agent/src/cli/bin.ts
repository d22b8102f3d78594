#!/usr/bin/env node
// The `csiplug` executable: runs main() with this process's arguments and
// streams, and the agent/demo handlers from handlers.ts.
import 'reflect-metadata';
import { errorMessage } from '@csiplug/core';
import { defaultHandlers } from './handlers';
import { main } from './main';

main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd(), stdin: process.stdin }, defaultHandlers()).then(
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
