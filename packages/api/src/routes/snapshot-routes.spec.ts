// Per-call CSI secrets and parameters on the wire, as Nomad's api package
// sends them (api/csi.go): a snapshot create's Secrets and Parameters in its
// body, a snapshot list's and delete's and a volume delete's secrets in the
// X-Nomad-CSI-Secrets header; and a register of a registered id updates it.
// Over a real server and the in-memory service; secrets are never echoed.
import { ValidationError } from '@csiplug/core';
import { ApiClient } from '../api-client';
import { CSI_SECRETS_HEADER, formatCsiSecrets, parseCsiSecrets } from '../csi-secrets';
import type { HttpApi } from '../http-api';
import { FakeAgentService, raw, startApi, volumeBody, volumeDoc } from '../testing';

const CEPH_PARAMETERS = { 'csi.storage.k8s.io/snapshotter-secret-name': 'csi-rbd-secret', clusterID: 'ceph-1' };
const CEPH_SECRETS = { userID: 'admin', userKey: 'AQD==' };

describe('per-call CSI secrets and parameters', () => {
  let fake: FakeAgentService;
  let api: HttpApi;
  let url: string;
  let client: ApiClient;

  beforeEach(async () => {
    fake = new FakeAgentService();
    ({ api, url } = await startApi(fake));
    client = new ApiClient({ address: url });
    await client.registerVolume(volumeDoc('vol1'));
  });

  afterEach(async () => {
    await api.dispose();
  });

  it("a snapshot create's body carries Secrets and Parameters (Nomad's CSISnapshotCreateRequest); the answer does not echo them", async () => {
    const r = await raw(url, 'PUT', '/v1/volumes/snapshot', {
      body: JSON.stringify({
        Snapshots: [{ SourceVolumeID: 'vol1', Name: 'nightly', Secrets: CEPH_SECRETS, Parameters: CEPH_PARAMETERS }],
      }),
    });
    expect(r.status).toBe(200);
    expect(fake.perCall.at(-1)).toEqual({ call: 'createSnapshot vol1', secrets: CEPH_SECRETS, parameters: CEPH_PARAMETERS });
    expect(r.text).not.toContain('AQD==');
    // The typed client sends the same.
    await client.createSnapshot('vol1', 'weekly', { secrets: { userID: 'x' }, parameters: { clusterID: 'c2' } });
    expect(fake.perCall.at(-1)).toEqual({ call: 'createSnapshot vol1', secrets: { userID: 'x' }, parameters: { clusterID: 'c2' } });
  });

  it('refuses Secrets or Parameters that are not maps of strings, saying which', async () => {
    const bad = await raw(url, 'PUT', '/v1/volumes/snapshot', {
      body: JSON.stringify({ Snapshots: [{ SourceVolumeID: 'vol1', Parameters: { size: 3 } }] }),
    });
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('Snapshots[0].Parameters must be an object of string values');
    const list = await raw(url, 'PUT', '/v1/volumes/snapshot', {
      body: JSON.stringify({ Snapshots: [{ SourceVolumeID: 'vol1', Secrets: ['a'] }] }),
    });
    expect(list.status).toBe(400);
    expect(list.text).toContain('Snapshots[0].Secrets must be an object of string values');
    expect(fake.perCall).toEqual([]);
  });

  it('a snapshot delete and list, and a volume delete, take their secrets from the X-Nomad-CSI-Secrets header', async () => {
    const headers = { [CSI_SECRETS_HEADER]: 'userID=admin,userKey=AQD==' };
    expect((await raw(url, 'DELETE', '/v1/volumes/snapshot?plugin_id=hostpath&snapshot_id=s1', { headers })).status).toBe(200);
    expect(fake.perCall.at(-1)).toEqual({ call: 'deleteSnapshot hostpath s1', secrets: CEPH_SECRETS });
    expect((await raw(url, 'GET', '/v1/volumes/snapshot?plugin_id=hostpath', { headers })).status).toBe(200);
    expect(fake.perCall.at(-1)).toEqual({ call: 'listSnapshots hostpath', secrets: CEPH_SECRETS });
    expect((await raw(url, 'DELETE', '/v1/volume/csi/vol1/delete', { headers })).status).toBe(200);
    expect(fake.perCall.at(-1)).toEqual({ call: 'deleteVolume vol1', secrets: CEPH_SECRETS });
    // Without the header: no secrets of the call's own.
    await raw(url, 'GET', '/v1/volumes/snapshot?plugin_id=hostpath');
    expect(fake.perCall.at(-1)).toEqual({ call: 'listSnapshots hostpath' });
  });

  it('a repeated X-Nomad-CSI-Secrets header: only the first counts, as Nomad reads it (Header.Get), never the two joined', async () => {
    const headers = { [CSI_SECRETS_HEADER]: ['userID=first', 'userID=second,userKey=extra'] };
    expect((await raw(url, 'DELETE', '/v1/volume/csi/vol1/delete', { headers })).status).toBe(200);
    expect(fake.perCall.at(-1)).toEqual({ call: 'deleteVolume vol1', secrets: { userID: 'first' } });
  });

  it('the typed client refuses a secret the header cannot carry, sending nothing and saying no value', async () => {
    const refusedSecrets: Record<string, string>[] = [{ userKey: 'a,b' }, { 'user,ID': 'x' }, { 'user=ID': 'x' }];
    for (const secrets of refusedSecrets) {
      const refused = await client.deleteVolume('vol1', { secrets }).catch((e: unknown) => e as Error);
      expect(refused).toBeInstanceOf(ValidationError);
      expect((refused as Error).message).toBe(
        'a secret of this call cannot be sent in the X-Nomad-CSI-Secrets header: a key may not hold "," or "=", nor a value ","; give the secret without them',
      );
    }
    expect(fake.perCall).toEqual([]);
  });

  it('the typed client sends the secrets of a list, a delete and a volume delete in the header', async () => {
    await client.listSnapshots({ pluginId: 'hostpath', secrets: { userID: 'l' } });
    expect(fake.perCall.at(-1)).toEqual({ call: 'listSnapshots hostpath', secrets: { userID: 'l' } });
    await client.deleteSnapshot('hostpath', 's1', { secrets: { userID: 'd' } });
    expect(fake.perCall.at(-1)).toEqual({ call: 'deleteSnapshot hostpath s1', secrets: { userID: 'd' } });
    await client.deleteVolume('vol1', { secrets: { userID: 'v', userKey: 'k=with=equals' } });
    expect(fake.perCall.at(-1)).toEqual({ call: 'deleteVolume vol1', secrets: { userID: 'v', userKey: 'k=with=equals' } });
  });

  it('a register of a registered id updates it (200), as Nomad; the answer has no secret values', async () => {
    const r = await raw(url, 'PUT', '/v1/volume/csi/vol1', {
      body: JSON.stringify(volumeBody('vol1', { secrets: { token: 'rotated' } })),
    });
    expect(r.status).toBe(200);
    expect(fake.calls).toContain('registerVolume vol1 update');
    expect(fake.getVolume('vol1')!.secrets).toEqual({ token: 'rotated' });
    expect(r.text).not.toContain('rotated');
  });
});

describe('the X-Nomad-CSI-Secrets header', () => {
  it("reads key=value pairs joined by commas, skipping a pair without '=' as Nomad does; the value keeps any further '='", () => {
    expect(parseCsiSecrets('userID=admin,userKey=AQD==')).toEqual(CEPH_SECRETS);
    expect(parseCsiSecrets('junk,a=1')).toEqual({ a: '1' });
    expect(parseCsiSecrets('junk')).toBeUndefined();
    expect(parseCsiSecrets(undefined)).toBeUndefined();
    // Only the first of a repeated header; "__proto__" is a key like any other.
    expect(parseCsiSecrets(['a=1', 'b=2'])).toEqual({ a: '1' });
    const odd = parseCsiSecrets('__proto__=x,constructor=y')!;
    expect(Object.keys(odd)).toEqual(['__proto__', 'constructor']);
    expect(odd['__proto__']).toBe('x');
    expect(formatCsiSecrets(CEPH_SECRETS)).toBe('userID=admin,userKey=AQD==');
    expect(formatCsiSecrets({})).toBeUndefined();
  });
});
