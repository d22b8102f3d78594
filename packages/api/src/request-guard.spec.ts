// The API's front door, tried as an attacker on the same machine would:
// real HTTP requests (and raw bytes on a socket where a client library
// would not send them) against a real server on 127.0.0.1.
import { MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as https from 'https';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import { FakeAgentService } from './testing';
import { nomadJob, raw, startApi } from './testing';
import { HttpApi } from './http-api';
import { parseHostHeader } from '@csiplug/jobspec';

/** Sends `text` as is and resolves with everything the server sent back until it closed (or `ms` passed). */
function rawSocket(port: number, text: string, ms = 2_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(), ms);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
    socket.write(text);
  });
}

function statusOf(response: string): number {
  return Number(/^HTTP\/1\.[01] (\d{3})/.exec(response)?.[1] ?? 0);
}

describe('the request guard', () => {
  let fake: FakeAgentService;
  let api: HttpApi;
  let url: string;
  let port: number;

  beforeEach(async () => {
    fake = new FakeAgentService();
    ({ api, url } = await startApi(fake, { allowedHosts: ['csiplug.example'], allowedOrigins: ['https://ui.example:8443'] }));
    port = Number(new URL(url).port);
  });

  afterEach(async () => {
    await api.dispose();
  });

  const job = JSON.stringify({ Job: nomadJob('evil') });

  describe('cross-site request forgery', () => {
    it.each([
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'text/plain; charset=utf-8',
      'application/json-patch+json',
    ])('refuses a write sent as %s from a browser (any Origin, or a Sec-Fetch-* header alone), and runs nothing', async (type) => {
      // What browsers send: a foreign or opaque origin, the agent's own (a page of its own is held to JSON too), or only Sec-Fetch-*.
      const browsers = [
        { Origin: 'http://evil.example' },
        { Origin: 'null' },
        { Origin: `http://127.0.0.1:${port}` },
        { 'Sec-Fetch-Site': 'same-origin' },
        { 'Sec-Fetch-Mode': 'no-cors' },
      ];
      for (const browser of browsers) {
        const r = await raw(url, 'POST', '/v1/jobs', { body: job, headers: { 'Content-Type': type, ...browser } });
        expect(r.status).toBe(403);
        expect(r.code).toBe('EFORBIDDEN');
      }
      expect(fake.jobs.size).toBe(0);
    });

    it("refuses a browser's write with no Content-Type at all (fetch of a typeless Blob), saying why", async () => {
      for (const browser of [{ Origin: `http://localhost:${port}` }, { 'Sec-Fetch-Mode': 'no-cors', 'Sec-Fetch-Site': 'same-site' }]) {
        const r = await raw(url, 'POST', '/v1/jobs', { body: job, noContentType: true, headers: browser });
        expect(r.status).toBe(403);
        expect(r.error).toMatch(
          /Content-Type: application\/json \(got none\).*a request from a browser \(it carries Origin or Sec-Fetch-\*\)/,
        );
      }
      expect(fake.jobs.size).toBe(0);
    });

    it("takes a write with no Content-Type, or curl --data's form type, from a client that is no browser: Nomad's Go client sends none", async () => {
      expect((await raw(url, 'PUT', '/v1/jobs', { body: job, noContentType: true })).status).toBe(200);
      const curl = await raw(url, 'POST', '/v1/jobs', {
        body: JSON.stringify({ Job: nomadJob('from-curl') }),
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      });
      expect(curl.status).toBe(200);
      expect([...fake.jobs.keys()].sort()).toEqual(['evil', 'from-curl']);
    });

    it('takes a write without a JSON type from a browser only when it carries the token in a header no page can send cross-site', async () => {
      const secured = await startApi(fake, { aclToken: 'tok' });
      try {
        const sameOrigin = { 'Sec-Fetch-Site': 'same-origin', 'Content-Type': 'text/plain' };
        const withToken = await raw(secured.url, 'POST', '/v1/jobs', { body: job, headers: { ...sameOrigin, 'X-Nomad-Token': 'tok' } });
        expect(withToken.status).toBe(200);
        const bearer = await raw(secured.url, 'POST', '/v1/jobs', {
          body: JSON.stringify({ Job: nomadJob('bearer') }),
          headers: { ...sameOrigin, Authorization: 'Bearer tok' },
        });
        expect(bearer.status).toBe(200);
        // Basic credentials a browser may attach by itself count for nothing; nor does a token from a foreign origin.
        const basic = await raw(secured.url, 'POST', '/v1/jobs', { body: job, headers: { ...sameOrigin, Authorization: 'Basic dG9r' } });
        expect(basic.error).toMatch(/Content-Type: application\/json/);
        const foreign = await raw(secured.url, 'POST', '/v1/jobs', {
          body: job,
          headers: { 'Content-Type': 'text/plain', Origin: 'http://evil.example', 'X-Nomad-Token': 'tok' },
        });
        expect(foreign.error).toMatch(/Origin "http:\/\/evil\.example" is not this agent's own origin/);
        expect([...fake.jobs.keys()].sort()).toEqual(['bearer', 'evil']);
      } finally {
        await secured.api.dispose();
      }
    });

    it("refuses a browser's DELETE that carries a form body", async () => {
      await raw(url, 'POST', '/v1/jobs', { body: job });
      for (const browser of [{ Origin: `http://127.0.0.1:${port}` }, { 'Sec-Fetch-Mode': 'cors' }]) {
        const r = await raw(url, 'DELETE', '/v1/job/evil', {
          body: 'purge=true',
          headers: { 'Content-Type': 'application/x-www-form-urlencoded', ...browser },
        });
        expect(r.status).toBe(403);
      }
      expect(fake.jobs.get('evil')?.status).toBe('running');
    });

    it("takes a browser's write only as application/json with no parameter but charset=utf-8 (SECURITY.md), and a bodiless DELETE as no write", async () => {
      const own = { Origin: `http://127.0.0.1:${port}` };
      for (const [type, status] of [
        ['application/json', 200],
        ['Application/JSON; charset=UTF-8', 200],
        ['application/json;charset="utf-8"', 200],
        ['application/json; charset=latin1', 403],
        ['application/json; boundary=x', 403],
      ] as const) {
        const r = await raw(url, 'PUT', '/v1/jobs', { body: job, headers: { ...own, 'Content-Type': type } });
        expect([type, r.status]).toEqual([type, status]);
      }
      expect((await raw(url, 'DELETE', '/v1/job/evil', { headers: own })).status).toBe(200);
    });

    it('refuses a JSON write from a foreign origin, naming it', async () => {
      const r = await raw(url, 'POST', '/v1/jobs', { body: job, headers: { Origin: 'http://evil.example' } });
      expect(r.status).toBe(403);
      expect(r.error).toMatch(/Origin "http:\/\/evil\.example" is not this agent's own origin/);
      expect(fake.jobs.size).toBe(0);
    });

    it('refuses reads from a foreign origin too, an opaque origin, and another port on localhost', async () => {
      for (const origin of ['http://evil.example', 'null', `http://localhost:${port + 1}`, `https://127.0.0.1:${port}`]) {
        expect((await raw(url, 'GET', '/v1/jobs', { headers: { Origin: origin } })).status).toBe(403);
      }
    });

    it("serves the agent's own origin and a configured one", async () => {
      for (const origin of [`http://127.0.0.1:${port}`, `http://localhost:${port}`, 'https://ui.example:8443']) {
        expect((await raw(url, 'GET', '/v1/jobs', { headers: { Origin: origin } })).status).toBe(200);
      }
      expect((await raw(url, 'POST', '/v1/jobs', { body: job, headers: { Origin: `http://localhost:${port}` } })).status).toBe(200);
    });

    it('refuses Sec-Fetch-Site: cross-site, and serves same-origin and none', async () => {
      const r = await raw(url, 'GET', '/v1/jobs', { headers: { 'Sec-Fetch-Site': 'cross-site' } });
      expect(r.status).toBe(403);
      expect(r.error).toMatch(/cross-site requests are refused/);
      expect(
        (await raw(url, 'GET', '/v1/jobs', { headers: { 'Sec-Fetch-Site': 'cross-site', Origin: 'https://ui.example:8443' } })).status,
      ).toBe(200);
      for (const site of ['same-origin', 'none'])
        expect((await raw(url, 'GET', '/v1/jobs', { headers: { 'Sec-Fetch-Site': site } })).status).toBe(200);
    });

    it('answers a CORS preflight without granting anything', async () => {
      const r = await raw(url, 'OPTIONS', '/v1/jobs', {
        headers: { Origin: 'http://evil.example', 'Access-Control-Request-Method': 'POST' },
      });
      expect(r.status).toBe(403);
      expect(Object.keys(r.headers).filter((h) => h.startsWith('access-control-'))).toEqual([]);
    });
  });

  describe('DNS rebinding and proxy-style requests', () => {
    it('refuses a foreign Host header', async () => {
      const r = await raw(url, 'GET', '/v1/jobs', { headers: { Host: `evil.example:${port}` } });
      expect(r.status).toBe(403);
      expect(r.error).toMatch(/the Host header "evil\.example:\d+" does not name this agent/);
    });

    it('serves the bound address and localhost on the bound port, and a configured name on any port', async () => {
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `CSIPLUG.example:${port}`, 'csiplug.example', 'csiplug.example:8443']) {
        expect((await raw(url, 'GET', '/v1/jobs', { headers: { Host: host } })).status).toBe(200);
      }
    });

    it('refuses its own names with another port: a page on another port of this machine is another origin', async () => {
      for (const host of [`127.0.0.1:${port + 1}`, `localhost:${port === 80 ? 81 : 80}`, 'localhost', '127.0.0.1']) {
        const r = await raw(url, 'GET', '/v1/jobs', { headers: { Host: host } });
        expect(r.status).toBe(403);
        expect(r.error).toMatch(new RegExp(`names port \\d+, but this agent listens on ${port}`));
      }
    });

    it('refuses an absolute-form target, even one naming this agent', async () => {
      for (const target of [`http://evil.example/v1/jobs`, `http://127.0.0.1:${port}/v1/jobs`]) {
        const r = await rawSocket(port, `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
        expect(statusOf(r)).toBe(403);
        expect(r).toMatch(/origin-form/);
      }
    });

    it('answers OPTIONS * with 403, not 500', async () => {
      const r = await rawSocket(port, `OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
      expect(statusOf(r)).toBe(403);
    });

    it('refuses a request with no Host (HTTP/1.0)', async () => {
      const r = await rawSocket(port, 'GET /v1/jobs HTTP/1.0\r\n\r\n');
      expect(statusOf(r)).toBe(403);
      expect(r).toMatch(/no Host header/);
    });

    it('reads Host headers as a browser sends them', () => {
      expect(parseHostHeader('[::1]:4747')).toEqual({ host: '::1', port: 4747 });
      expect(parseHostHeader('Example.COM')).toEqual({ host: 'example.com' });
      for (const bad of ['a b', 'user@host', 'host:99999', 'host/path', '']) expect(parseHostHeader(bad)).toBeUndefined();
    });
  });

  describe('runs before the token', () => {
    it('refuses a foreign origin even with the right token, and a right request without a token is a 403 of its own', async () => {
      const secured = await startApi(fake, { aclToken: 'tok' });
      try {
        const foreign = await raw(secured.url, 'POST', '/v1/jobs', {
          body: job,
          headers: { 'X-Nomad-Token': 'tok', Origin: 'http://evil.example' },
        });
        expect(foreign.status).toBe(403);
        expect(foreign.error).toMatch(/Origin/);
        const noToken = await raw(secured.url, 'POST', '/v1/jobs', { body: job });
        expect(noToken.error).toMatch(/requires an ACL token/);
        expect(fake.jobs.size).toBe(0);
      } finally {
        await secured.api.dispose();
      }
    });
  });

  describe('hostile bodies and ids', () => {
    it('answers JSON nested 100,000 deep with 400 and stays up', async () => {
      const deep = `{"Job":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
      const r = await raw(url, 'POST', '/v1/jobs', { body: deep });
      expect(r.status).toBe(400);
      expect(r.code).toBe('EBAD_JSON');
      expect(r.error).toMatch(/nests objects and arrays more than 64 deep/);
      expect((await raw(url, 'GET', '/v1/agent/health')).status).toBe(200);
    });

    it('does not count brackets inside strings', async () => {
      const doc = nomadJob('brackets');
      doc.TaskGroups[0]!.Tasks[0]!.Config.args = ['['.repeat(500) + '\\"{{{'];
      expect((await raw(url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: doc }) })).status).toBe(200);
    });

    it.each(['a\nb', 'evil\r\nInjected: 1', 'esc\u001b[2J', 'del\u007f'])('refuses a job id with control characters (%j)', async (id) => {
      const r = await raw(url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: nomadJob(id) }) });
      expect(r.status).toBe(400);
      expect(r.error).toMatch(/may not contain control characters/);
      expect(fake.jobs.size).toBe(0);
    });
  });
});

describe('connection limits', () => {
  let fake: FakeAgentService;
  let clock: FakeClock;
  const sockets: net.Socket[] = [];

  beforeEach(() => {
    fake = new FakeAgentService();
    clock = new FakeClock();
  });

  afterEach(() => {
    for (const s of sockets.splice(0)) s.destroy();
  });

  async function idle(port: number, n: number): Promise<void> {
    for (let i = 0; i < n; i++) {
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => undefined);
      await new Promise<void>((resolve) => s.once('connect', () => resolve()));
      sockets.push(s);
    }
  }

  async function until(cond: () => boolean): Promise<void> {
    for (let i = 0; i < 2_000 && !cond(); i++) await new Promise((r) => setTimeout(r, 5));
    expect(cond()).toBe(true);
  }

  it('refuses a flood at the door, still answers health, and serves again once it drains', async () => {
    const { api, url } = await startApi(fake, {
      clock,
      limits: { maxConnections: 4, maxConnectionsPerClient: 100, idleTimeoutMs: 60_000 },
    });
    try {
      const port = Number(new URL(url).port);
      await idle(port, 4);
      await until(() => api.connections === 4);

      const health = await rawSocket(port, `GET /v1/agent/health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      expect(statusOf(health)).toBe(200);
      expect(health).toMatch(/Connection: close/i);
      const jobs = await rawSocket(port, `GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      expect(statusOf(jobs)).toBe(503);
      expect(jobs).toMatch(/ETOO_MANY_CONNECTIONS/);

      // A reserve full of fresh flood connections: a newcomer is closed at once...
      await idle(port, 16);
      await until(() => api.connections === 4 + 16);
      expect(await rawSocket(port, `GET /v1/agent/health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`)).toBe('');
      // ...but once they have sat idle past their grace, the oldest makes room for a fresh health check.
      await clock.advance(1_000);
      expect(statusOf(await rawSocket(port, `GET /v1/agent/health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`))).toBe(200);
      expect(api.connections).toBeLessThanOrEqual(4 + 16);

      // The idle flood times out (on the API's clock) and the API serves again.
      await clock.advance(60_000);
      await until(() => api.connections === 0);
      sockets.splice(0);
      expect((await raw(url, 'GET', '/v1/jobs')).status).toBe(200);
    } finally {
      await api.dispose();
    }
  });

  it('closes a connection that trickles bytes but never finishes a request', async () => {
    const { api, url } = await startApi(fake, { clock, limits: { maxConnections: 10, maxConnectionsPerClient: 10, idleTimeoutMs: 5_000 } });
    try {
      const port = Number(new URL(url).port);
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => undefined); // the server cuts it: a reset is expected
      sockets.push(s);
      const closed = new Promise<void>((resolve) => s.on('close', () => resolve()));
      await new Promise<void>((resolve) => s.once('connect', () => resolve()));
      s.write('GET /v1/jobs HTTP/1.1\r\n');
      await until(() => api.connections === 1);
      await clock.advance(4_000);
      s.write('X-Slow: 1\r\n');
      await clock.advance(1_000);
      await closed;
      expect(api.connections).toBe(0);
    } finally {
      await api.dispose();
    }
  });

  it('cuts off a body that trickles in slower than the idle timeout', async () => {
    const { api, url } = await startApi(fake, { clock, limits: { maxConnections: 10, maxConnectionsPerClient: 10, idleTimeoutMs: 5_000 } });
    try {
      const port = Number(new URL(url).port);
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => undefined);
      sockets.push(s);
      const closed = new Promise<void>((resolve) => s.on('close', () => resolve()));
      await new Promise<void>((resolve) => s.once('connect', () => resolve()));
      s.write(`POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"Job":`);
      await until(() => (api as unknown as { inflight: number }).inflight === 1);
      await clock.advance(5_000);
      await closed;
      expect(fake.jobs.size).toBe(0);
    } finally {
      await api.dispose();
    }
  });

  it('ends an event stream and a log stream queued behind another request when the client drops the connection', async () => {
    const { api, url } = await startApi(fake, { clock });
    try {
      const port = Number(new URL(url).port);
      const streams = (api as unknown as { streams: Set<unknown> }).streams;
      for (let round = 0; round < 5; round++) {
        const s = net.connect(port, '127.0.0.1');
        s.on('error', () => undefined);
        await new Promise<void>((resolve) => s.once('connect', () => resolve()));
        const get = `GET /v1/event/stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;
        s.write(get + get);
        await until(() => streams.size === 2);
        s.destroy();
        await until(() => streams.size === 0);
      }
    } finally {
      await api.dispose();
    }
  });

  it('serves nothing new on a kept-alive connection once closing has begun', async () => {
    const { api, url } = await startApi(fake, { clock, closeGraceMs: 60_000 });
    let release: (() => void) | undefined;
    try {
      const port = Number(new URL(url).port);
      expect((await raw(url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: nomadJob('web') }) })).status).toBe(200);
      fake.gate = new Promise<void>((r) => (release = r));
      // A slow request keeps the API busy while it closes...
      const slow = raw(url, 'POST', '/v1/jobs', { body: JSON.stringify({ Job: nomadJob('other') }) });
      // ...and an event stream's connection is busy when closing begins, then idle and still open.
      const b = net.connect(port, '127.0.0.1');
      sockets.push(b);
      let text = '';
      b.on('data', (d: Buffer) => (text += d.toString()));
      await new Promise<void>((resolve) => b.once('connect', () => resolve()));
      b.write(`GET /v1/event/stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      await until(() => text.includes('200 OK') && (api as unknown as { inflight: number }).inflight === 1);
      const closing = api.dispose();
      await until(() => text.includes('0\r\n\r\n')); // the stream ended (last chunk)
      b.write(`DELETE /v1/job/web HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
      await until(() => text.includes('ESHUTDOWN') || b.destroyed);
      expect(text).toMatch(/HTTP\/1\.1 503[\s\S]*ESHUTDOWN/);
      release!();
      expect((await slow).status).toBe(200);
      await closing;
      expect(fake.calls.filter((c) => c.startsWith('stopJob'))).toEqual([]);
    } finally {
      release?.();
      await api.dispose();
    }
  });

  it('caps connections per client address', async () => {
    const { api, url } = await startApi(fake, {
      clock,
      limits: { maxConnections: 100, maxConnectionsPerClient: 2, idleTimeoutMs: 60_000 },
    });
    try {
      const port = Number(new URL(url).port);
      await idle(port, 2);
      await until(() => api.connections === 2);
      expect(statusOf(await rawSocket(port, `GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`))).toBe(503);
    } finally {
      await api.dispose();
    }
  });

  it('dispose() does not wait for idle connections or a stuck client', async () => {
    const { api, url } = await startApi(fake, { clock, closeGraceMs: 1_000 });
    const port = Number(new URL(url).port);
    await idle(port, 5);
    await until(() => api.connections === 5);
    await api.dispose();
    await until(() => api.connections === 0);
  });
});

describe('who may listen where', () => {
  const fake = new FakeAgentService();

  it('refuses a non-loopback address without a token or TLS', async () => {
    const logger = new MemoryLogger();
    for (const options of [{}, { aclToken: 't' }]) {
      const api = new HttpApi(fake, { bindAddr: '0.0.0.0', port: 0, logger, ...options });
      await expect(api.listen()).rejects.toMatchObject({ code: 'EINSECURE' });
      await api.dispose();
    }
  });

  it('serves it with insecure_allow_public, warning loudly', async () => {
    const logger = new MemoryLogger();
    const api = new HttpApi(fake, { bindAddr: '0.0.0.0', port: 0, logger, insecureAllowPublic: true });
    try {
      await api.listen();
      expect(logger.records.some((e) => e.level === 'warn' && /INSECURE/.test(e.msg))).toBe(true);
    } finally {
      await api.dispose();
    }
  });

  describe('TLS', () => {
    let dir: string;
    beforeAll(() => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-tls-'));
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'rsa:2048',
          '-nodes',
          '-subj',
          '/CN=localhost',
          '-addext',
          'subjectAltName=DNS:localhost,IP:127.0.0.1',
          '-days',
          '1',
          '-keyout',
          path.join(dir, 'key.pem'),
          '-out',
          path.join(dir, 'cert.pem'),
        ],
        { stdio: 'ignore' },
      );
    });
    afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

    it('serves HTTPS with the configured certificate, and its own origin is https', async () => {
      const tls = { certFile: path.join(dir, 'cert.pem'), keyFile: path.join(dir, 'key.pem') };
      const api = new HttpApi(fake, { bindAddr: '127.0.0.1', port: 0, logger: new MemoryLogger(), tls });
      try {
        await api.listen();
        expect(api.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
        const ca = fs.readFileSync(tls.certFile);
        const get = (headers: Record<string, string>) =>
          new Promise<number>((resolve, reject) => {
            https
              .get(`${api.url}/v1/agent/health`, { ca, headers }, (res) => {
                res.resume();
                resolve(res.statusCode!);
              })
              .on('error', reject);
          });
        expect(await get({})).toBe(200);
        expect(await get({ Origin: api.url! })).toBe(200);
        expect(await get({ Origin: api.url!.replace('https', 'http') })).toBe(403);
        // Plain HTTP on the TLS port gets nothing it can use.
        expect(statusOf(await rawSocket(Number(new URL(api.url!).port), 'GET /v1/agent/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'))).toBe(
          0,
        );
      } finally {
        await api.dispose();
      }
    });

    it('says which file is missing or unusable', () => {
      expect(
        () =>
          new HttpApi(fake, {
            bindAddr: '127.0.0.1',
            port: 0,
            logger: new MemoryLogger(),
            tls: { certFile: path.join(dir, 'nope.pem'), keyFile: path.join(dir, 'key.pem') },
          }),
      ).toThrow(/cannot read the TLS certificate .*nope\.pem/);
      expect(
        () =>
          new HttpApi(fake, {
            bindAddr: '127.0.0.1',
            port: 0,
            logger: new MemoryLogger(),
            tls: { certFile: path.join(dir, 'key.pem'), keyFile: path.join(dir, 'key.pem') },
          }),
      ).toThrow(/do not make a usable pair/);
    });
  });
});
