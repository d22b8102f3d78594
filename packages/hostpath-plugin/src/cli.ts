#!/usr/bin/env node
// csiplug-hostpath: runs the hostpath CSI plugin until SIGTERM or SIGINT,
// then stops serving and removes its socket.
// @csiplug/core loads tsyringe, which needs the reflect polyfill first.
import 'reflect-metadata';
import { errorMessage } from '@csiplug/core';
import { parseConfig } from './config';
import { startPlugin } from './main';

async function main(): Promise<void> {
  let config;
  try {
    config = parseConfig(process.argv.slice(2));
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
