// RegistryHttp's TLS trust as a request sees it: one context per origin,
// made before the request, so a trust that cannot be used (a client
// certificate pair in certs.d whose key does not parse) fails the request as
// a TLS error that names the certs dir, with no timer left behind.
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeClock } from '@csiplug/core/testing';
import { RegistryTlsError } from '../errors';
import { RegistryHttp } from './http';

describe('RegistryHttp trust', () => {
  let certsDir: string;
  beforeEach(() => {
    certsDir = mkdtempSync(join(tmpdir(), 'images-http-spec-'));
  });
  afterEach(() => rmSync(certsDir, { recursive: true, force: true }));

  it('fails a request whose client key in certs.d does not parse as a TLS error naming the certs dir, and leaves no timer', async () => {
    const registry = '127.0.0.1:1';
    mkdirSync(join(certsDir, registry));
    writeFileSync(join(certsDir, registry, 'client.cert'), 'not a certificate');
    writeFileSync(join(certsDir, registry, 'client.key'), 'not a key');
    const clock = new FakeClock();
    const http = new RegistryHttp(clock, certsDir, new Set());
    try {
      const request = http.request({
        url: http.url(registry, registry, '/v2/'),
        headers: {},
        registry,
        what: 'the API root',
        activityTimeoutMs: 1_000,
      });
      await expect(request).rejects.toBeInstanceOf(RegistryTlsError);
      await expect(request).rejects.toThrow(`${certsDir}/${registry}/ca.crt`);
      expect(clock.pendingTimers).toBe(0);
    } finally {
      http.dispose();
    }
  });
});
