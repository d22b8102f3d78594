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
  },
  (err: unknown) => {
    process.stderr.write(`Error: ${errorMessage(err)}\n`);
    process.exitCode = 1;
  },
);
