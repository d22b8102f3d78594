// The test-only request log (--request-log / CSIPLUG_HOSTPATH_REQUEST_LOG) on
// the real process: what each request carried reaches the file — ceph-style
// snapshot parameters and secrets with their values (config.spec.ts: it is
// off unless asked for).
import * as fs from 'node:fs';
import { mountCapability } from '@csiplug/csi';
import { readRequestLog } from '../src/request-log';
import { Harness } from './harness';

jest.setTimeout(60_000);

const RW = mountCapability('SINGLE_NODE_WRITER');

describe('hostpath plugin request log (real process)', () => {
  let h: Harness;
  beforeEach(() => {
    h = new Harness();
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('records each request: its rpc, ids, parameters and secrets with their values; the file is owner-only', async () => {
    const log = h.path('requests.jsonl');
    h.spawn([], { CSIPLUG_HOSTPATH_REQUEST_LOG: log });
    const client = h.client();
    await h.waitReady(client);
    const volumeId = (await client.createVolume({ name: 'data', volumeCapabilities: [RW], secrets: { userID: 'admin' } })).volume!.volumeId;
    const parameters = { 'csi.storage.k8s.io/snapshotter-secret-name': 'csi-rbd-secret', clusterID: 'ceph-1' };
    await client.createSnapshot({ sourceVolumeId: volumeId, name: 'nightly', parameters, secrets: { userID: 'admin', userKey: 'AQD==' } });
    const seen = readRequestLog(log);
    expect(seen.map((r) => r.rpc)).toEqual(expect.arrayContaining(['Probe', 'CreateVolume', 'CreateSnapshot']));
    expect(seen.find((r) => r.rpc === 'CreateVolume')).toMatchObject({ name: 'data', secrets: { userID: 'admin' } });
    expect(seen.find((r) => r.rpc === 'CreateSnapshot')).toMatchObject({
      sourceVolumeId: volumeId,
      name: 'nightly',
      parameters,
      secrets: { userID: 'admin', userKey: 'AQD==' },
    });
    expect(fs.statSync(log).mode & 0o777).toBe(0o600);
  });

  it('a log file there already, readable by others, is made owner-only before the first request is written; its lines are kept', async () => {
    const log = h.path('existing.jsonl');
    fs.writeFileSync(log, `${JSON.stringify({ rpc: 'Earlier', time: 1 })}\n`, { mode: 0o644 });
    fs.chmodSync(log, 0o644);
    h.spawn([], { CSIPLUG_HOSTPATH_REQUEST_LOG: log });
    const client = h.client();
    await h.waitReady(client);
    await client.createVolume({ name: 'data', volumeCapabilities: [RW], secrets: { userID: 'admin' } });
    expect(fs.statSync(log).mode & 0o777).toBe(0o600);
    expect(readRequestLog(log).map((r) => r.rpc)).toEqual(expect.arrayContaining(['Earlier', 'CreateVolume']));
    expect(readRequestLog(log)[0]!.rpc).toBe('Earlier');
  });
});
