// Cross-site request forgery, tried with a real browser (Debian's chromium,
// driven by playwright-core as in status-page.test.ts): a page of another
// site (http://localhost:P, while the API is at http://127.0.0.1:Q) posts
// forms (text/plain, url-encoded, multipart) and no-cors fetches (text/plain,
// a typeless Blob) at the API. The API takes writes without a JSON type from
// clients that are no browser (Nomad's Go client sends none), so this shows
// that what a browser sends is still told apart and refused, and that nothing
// is run. A recording server beside it shows what the browser really sent:
// each request carries Origin and Sec-Fetch-Site, the headers the front door
// reads (request-guard.ts).
import { FakeAgentService, startApi } from '@csiplug/api/testing';
import type { HttpApi } from '@csiplug/api';
import type { MemoryLogger } from '@csiplug/core';
import * as fs from 'fs';
import * as http from 'http';
import type { AddressInfo } from 'net';
import { chromium, type Browser, type Page } from 'playwright-core';

jest.setTimeout(120_000);

const CHROMIUM = '/usr/bin/chromium';
/** What the page sends: forms 3 and fetches 2. */
const ATTACKS = 5;

// A job the API would run if it got through: Nomad's JSON job format, as /v1/jobs reads it.
const JOB = JSON.stringify({
  Job: { ID: 'pwned', TaskGroups: [{ Name: 'g', Tasks: [{ Name: 't', Driver: 'raw_exec', Config: { command: '/bin/true' } }] }] },
});

/** The attacker's page: every request a page may send cross-site without asking first, at `target`. */
function attackPage(target: string): string {
  // A text/plain form whose field name and value rebuild a JSON body: name + "=" + value.
  const plainName = JOB.slice(0, -1) + ',"pad":"';
  const attr = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
  return `<!doctype html><html><body>
<iframe name="f1"></iframe><iframe name="f2"></iframe><iframe name="f3"></iframe>
<form id="plain" method="POST" enctype="text/plain" action="${target}/v1/jobs" target="f1"><input name="${attr(plainName)}" value='"}'></form>
<form id="urlenc" method="POST" action="${target}/v1/jobs" target="f2"><input name="Job" value="${attr(JOB)}"></form>
<form id="multi" method="POST" enctype="multipart/form-data" action="${target}/v1/jobs" target="f3"><input name="Job" value="${attr(JOB)}"></form>
<script>
window.attack = async () => {
  for (const id of ['plain', 'urlenc', 'multi']) document.getElementById(id).submit();
  const body = ${JSON.stringify(JOB)};
  await fetch('${target}/v1/jobs', { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body }).catch(() => {});
  await fetch('${target}/v1/jobs', { method: 'POST', mode: 'no-cors', body: new Blob([body]) }).catch(() => {});
};
</script></body></html>`;
}

async function listen(server: http.Server, host: string): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return (server.address() as AddressInfo).port;
}

async function until(what: string, check: () => boolean, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('a page of another site, in a real browser', () => {
  let browser: Browser;
  let fake: FakeAgentService;
  let api: HttpApi;
  let apiUrl: string;
  let logger: MemoryLogger;
  const servers: http.Server[] = [];
  /** Open until the test ends: the forms go on in their frames after the page's call returns. */
  const pages: Page[] = [];

  beforeAll(async () => {
    if (!fs.existsSync(CHROMIUM))
      throw new Error(`${CHROMIUM} is missing: run \`npm run setup-engines\` (npm test does) to install Debian's chromium`);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-sync'],
    });
  });

  beforeEach(async () => {
    fake = new FakeAgentService();
    ({ api, url: apiUrl, logger } = await startApi(fake));
  });

  afterEach(async () => {
    for (const p of pages.splice(0)) await p.close();
    await api.dispose();
    for (const s of servers.splice(0)) await new Promise<void>((resolve) => s.close(() => resolve()));
  });

  afterAll(async () => {
    await browser?.close();
  });

  /** Serves the attack page at http://localhost:P/ (the origin it answers) and runs it against `target`. */
  async function attack(target: string, site?: { server: http.Server; port: number }): Promise<void> {
    const { port } = site ?? (await attackSite());
    const page = await browser.newPage();
    pages.push(page);
    await page.goto(`http://localhost:${port}/?target=${encodeURIComponent(target)}`);
    await page.evaluate('window.attack()');
  }

  async function attackSite(): Promise<{ server: http.Server; port: number }> {
    const server = http.createServer((req, res) => {
      const target = new URL(req.url ?? '/', 'http://localhost').searchParams.get('target') ?? '';
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(attackPage(target));
    });
    servers.push(server);
    return { server, port: await listen(server, '127.0.0.1') };
  }

  it('sends every request with Origin and Sec-Fetch-Site: cross-site (what the front door reads)', async () => {
    const seen: http.IncomingHttpHeaders[] = [];
    const recorder = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        seen.push(req.headers);
        res.writeHead(204);
        res.end();
      });
    });
    servers.push(recorder);
    const port = await listen(recorder, '127.0.0.1');
    await attack(`http://127.0.0.1:${port}`);
    await until(`${ATTACKS} requests at the recording server`, () => seen.length >= ATTACKS);
    for (const headers of seen) {
      expect(headers.origin).toMatch(/^http:\/\/localhost:\d+$/);
      expect(headers['sec-fetch-site']).toBe('cross-site');
    }
    const types = seen.map((h) => (h['content-type'] ?? 'none').split(';')[0]).sort();
    expect(types).toEqual(['application/x-www-form-urlencoded', 'multipart/form-data', 'none', 'text/plain', 'text/plain']);
  });

  it('reaches the API with forms and no-cors fetches, each refused 403; no job is run', async () => {
    await attack(apiUrl);
    const refusals = () => logger.find('HTTP API request refused').filter((r) => r.fields.path === '/v1/jobs');
    await until(`${ATTACKS} refused requests at the API`, () => refusals().length >= ATTACKS);
    for (const r of refusals()) expect(r.fields.status).toBe(403);
    expect(fake.jobs.size).toBe(0);
    expect(fake.calls).toEqual([]);
  });

  it('refuses them for their content type even from a page of an origin the config allows (http { allowed_origins })', async () => {
    const site = await attackSite();
    const allowing = await startApi(fake, { allowedOrigins: [`http://localhost:${site.port}`] });
    try {
      await attack(allowing.url, site);
      const refusals = () => allowing.logger.find('HTTP API request refused').filter((r) => r.fields.path === '/v1/jobs');
      await until(`${ATTACKS} refused requests at the API`, () => refusals().length >= ATTACKS);
      for (const r of refusals()) {
        expect(r.fields.status).toBe(403);
        expect(r.fields.error).toMatch(/must send a JSON body with Content-Type: application\/json .*a request from a browser/);
      }
      expect(fake.jobs.size).toBe(0);
      expect(fake.calls).toEqual([]);
    } finally {
      await allowing.api.dispose();
    }
  });
});
