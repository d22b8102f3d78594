#!/usr/bin/env node
// csiplug-hostpath: runs the hostpath CSI plugin until SIGTERM or SIGINT,
// then stops serving and removes its socket.
// @csiplug/core loads tsyringe, which needs the reflect polyfill first.
import 'reflect-metadata';
import { errorMessage } from '@csiplug/core';
import { USAGE, parseConfig } from './config';
import { startPlugin } from './main';

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  // Asked for, the usage is the answer (stdout, exit 0), not an error.
  if (argv.some((arg) => arg === '--help' || arg === '-h' || arg === '-help')) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  let config;
  try {
    config = parseConfig(argv);
  } catch (err) {
    process.stderr.write(`csiplug-hostpath: ${errorMessage(err)}\n`);
    process.exit(2);
  }
  const plugin = await startPlugin(config);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) {
      process.stderr.write(`csiplug-hostpath: second ${signal}, exiting now\n`);
      process.exit(1);
    }
    stopping = true;
    plugin.dispose().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`csiplug-hostpath: shutdown failed: ${errorMessage(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  process.stderr.write(`csiplug-hostpath: ${errorMessage(err)}\n`);
  process.exit(1);
});
