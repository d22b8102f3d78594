// The CSIClient contract (@csiplug/csi/testing) against the real thing: the
// gRPC client over a unix socket to this plugin's process, with real bind
// mounts. The fake the other packages test with passes the same suite
// (packages/csi/test/fake-csi-client.test.ts).
import * as fs from 'node:fs';
import { readMountInfoSync, topMountAt } from '@csiplug/core';
import { describeCSIClientContract } from '@csiplug/csi/testing';
import { Harness } from './harness';

jest.setTimeout(60_000);

/** Whether `p` is a mount point in the kernel's table now (a path that does not exist is not one). */
function isMountPoint(p: string): boolean {
  let real: string;
  try {
    real = fs.realpathSync(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  return topMountAt(readMountInfoSync(), real) !== undefined;
}

describeCSIClientContract('GrpcCSIClient and the hostpath plugin', async () => {
  const h = new Harness();
  try {
    h.spawn();
    const client = h.client();
    await h.waitReady(client);
    return {
      client,
      nodeId: 'node-1',
      dir: fs.realpathSync(h.path()),
      isMounted: async (p) => isMountPoint(p),
      cleanup: () => h.cleanup(),
    };
  } catch (err) {
    await h.cleanup();
    throw err;
  }
});
