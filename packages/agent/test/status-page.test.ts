// What an operator looks at, against a real agent process with the real
// hostpath plugin, a volume and a workload: the metrics (/v1/metrics, JSON
// and Prometheus text) and the status page (/ui/) in a real headless
// browser — Debian's chromium, driven by playwright-core (no browser
// download; `npm test` installs chromium first when it is missing).
// The page's screenshot is kept under test-output/ as a CI artifact.
import * as fs from 'fs';
import * as http from 'http';
import * as path from 'path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { AgentHarness, PLUGIN_JOB, pollUntil, volumeSpec, workloadJob } from './support/agent-process';

jest.setTimeout(180_000);

const TOKEN = 'status-page-token';
const CHROMIUM = '/usr/bin/chromium';
/** Where the page's screenshot is kept (CI keeps the package's test output). */
const OUTPUT = path.resolve(__dirname, '..', 'test-output', 'status-page');

const FLAKY_JOB = `
job "flaky" {
  group "g" {
    task "exits" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "exit 3"]
      }
      restart {
        attempts = 2
        interval = "10m"
        delay    = "50ms"
        mode     = "fail"
      }
    }
  }
}`;

function get(
  port: number,
  urlPath: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: urlPath, headers }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      })
      .on('error', reject);
  });
}

/** The value of one Prometheus sample line, e.g. `csiplug_allocs{status="running"}`; undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('metrics and the status page of a running agent', () => {
  let h: AgentHarness;
  let workloadAlloc: string;

  beforeAll(async () => {
    h = new AgentHarness(`acl {\n  token = "${TOKEN}"\n}`);
    await h.start(TOKEN);
    await h.api.runJob(jobToNomadJson(await parseJobspec(PLUGIN_JOB, 'plugin.hcl')));
    await pollUntil(
      'plugin hostpath healthy',
      async () => ((await h.api.getPlugin('hostpath').catch(() => undefined))?.nodesHealthy === 1 ? true : undefined),
      60_000,
    );
    await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('vol-ui'), 'vol-ui.hcl')));
    const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(workloadJob('workload', 'vol-ui'), 'workload.hcl')));
    workloadAlloc = allocIds[0]!;
    await pollUntil(
      'the workload running',
      async () => ((await h.api.getAlloc(workloadAlloc)).clientStatus === 'running' ? true : undefined),
      60_000,
    );
  });

  afterAll(async () => {
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual([]);
  });

  it('/v1/metrics: Prometheus text with the CSI calls, plugin waits, volume steps, state gauges, restarts and the process', async () => {
    expect((await get(h.port, '/v1/metrics?format=prometheus')).status).toBe(403);
    await h.api.runJob(jobToNomadJson(await parseJobspec(FLAKY_JOB, 'flaky.hcl')));
    try {
      const [flaky] = (await h.api.getJob('flaky')).allocs;
      await pollUntil(
        'the flaky task restarted twice, then failed',
        async () => {
          const a = await h.api.getAlloc(flaky!.id);
          return a.tasks.exits?.restarts === 2 && a.clientStatus === 'failed' ? true : undefined;
        },
        30_000,
      );
      await checkMetrics();
    } finally {
      await h.api.stopJob('flaky', { purge: true });
    }
    // A purged job's restart series go with it (they were kept for as long as the agent ran).
    const after = (await get(h.port, '/v1/metrics?format=prometheus', { 'X-Nomad-Token': TOKEN })).body;
    expect(sample(after, 'csiplug_task_restarts_total{job="flaky",task="exits"}')).toBeUndefined();
    expect(sample(after, 'csiplug_events_total{topic="Task",type="Restarting"}')).toBe(2);
  });

  /** Everything the first test reads from /v1/metrics once the flaky job has failed. */
  async function checkMetrics(): Promise<void> {
    const res = await get(h.port, '/v1/metrics?format=prometheus', { 'X-Nomad-Token': TOKEN });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = res.body;
    // Recorded as it happened, by the packages.
    expect(sample(text, 'csiplug_csi_call_seconds_count{rpc="NodePublishVolume",code="OK"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'csiplug_csi_call_seconds_count{rpc="CreateVolume",code="OK"}')).toBe(1);
    expect(sample(text, 'csiplug_csi_call_seconds_count{rpc="Probe",code="OK"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'csiplug_plugin_wait_seconds_count{type="csi-node",phase="prerun",result="ready"}')).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'csiplug_volume_step_seconds_count{plugin="hostpath",step="publish",result="ok"}')).toBe(1);
    // Durations are measured, not just counted.
    expect(sample(text, 'csiplug_csi_call_seconds_sum{rpc="NodePublishVolume",code="OK"}')).toBeGreaterThan(0);
    expect(sample(text, 'csiplug_volume_step_seconds_sum{plugin="hostpath",step="publish",result="ok"}')).toBeGreaterThan(0);
    expect(sample(text, 'csiplug_task_restarts_total{job="flaky",task="exits"}')).toBe(2);
    expect(sample(text, 'csiplug_events_total{topic="Task",type="Restarting"}')).toBe(2);
    // Read from the agent's state when collected.
    expect(sample(text, 'csiplug_plugin_instances{plugin="hostpath",kind="node",health="healthy"}')).toBe(1);
    expect(sample(text, 'csiplug_plugin_instances{plugin="hostpath",kind="controller",health="healthy"}')).toBe(1);
    expect(sample(text, 'csiplug_plugins{healthy="true"}')).toBe(1);
    expect(sample(text, 'csiplug_registry_entries{type="csi-node"}')).toBe(1);
    expect(sample(text, 'csiplug_volumes{plugin="hostpath"}')).toBe(1);
    expect(sample(text, 'csiplug_volume_claims{plugin="hostpath",mode="write"}')).toBe(1);
    expect(sample(text, 'csiplug_allocs{status="running"}')).toBe(2);
    expect(sample(text, 'csiplug_allocs{status="failed"}')).toBe(1);
    expect(sample(text, 'csiplug_metrics_collect_errors_total{gauge="csiplug_volumes"}')).toBeUndefined();
    expect(sample(text, 'csiplug_unmounts_pending')).toBe(0);
    // The process itself.
    expect(sample(text, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds \d/m);
    expect(text).toMatch(/^process_cpu_seconds_total \d/m);

    // The same figures as JSON (the default format).
    const json = JSON.parse((await get(h.port, '/v1/metrics', { 'X-Nomad-Token': TOKEN })).body) as {
      name: string;
      type: string;
      values: { labels: Record<string, string>; value: number }[];
    }[];
    const claims = json.find((m) => m.name === 'csiplug_volume_claims');
    expect(claims).toMatchObject({ type: 'gauge', values: [{ labels: { plugin: 'hostpath', mode: 'write' }, value: 1 }] });
    expect(json.find((m) => m.name === 'csiplug_csi_call_seconds')?.type).toBe('histogram');
    expect((await get(h.port, '/v1/metrics?format=xml', { 'X-Nomad-Token': TOKEN })).status).toBe(400);
    // What a Prometheus scrape job sends: Authorization: Bearer.
    expect((await get(h.port, '/v1/metrics?format=prometheus', { Authorization: `Bearer ${TOKEN}` })).status).toBe(200);
  }

  it('/ui/ is served with a strict content policy, holds no data, and nothing else under /ui/ is served', async () => {
    const page = await get(h.port, '/ui/');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    for (const [file, type] of [
      ['/ui/app.js', 'text/javascript; charset=utf-8'],
      ['/ui/app.css', 'text/css; charset=utf-8'],
    ]) {
      const r = await get(h.port, file!);
      expect(r.headers['content-type']).toBe(type);
      expect(r.headers['x-content-type-options']).toBe('nosniff');
      expect(r.headers['content-security-policy']).toBeDefined();
    }
    expect(page.headers['x-frame-options']).toBe('DENY');
    expect(page.body).not.toContain('vol-ui');
    expect((await get(h.port, '/ui')).headers.location).toBe('ui/');
    expect((await get(h.port, '/ui/../v1/volumes')).status).not.toBe(200);
    for (const sneaky of ['/ui/%2e%2e/package.json', '/ui/..%2fpackage.json', '/ui/%2e%2e%2f%2e%2e%2fpackage.json']) {
      const r = await get(h.port, sneaky);
      expect([403, 404]).toContain(r.status);
      expect(r.body).not.toContain('@csiplug');
    }
    expect((await get(h.port, '/ui/secret.txt')).status).toBe(404);
    // The data behind it still asks for the token.
    expect((await get(h.port, '/v1/volumes')).status).toBe(403);
    // A page of another site cannot load it through a name that is not this agent's.
    expect((await get(h.port, '/ui/', { Host: 'evil.example' })).status).toBe(403);
  });

  describe('in a real browser', () => {
    let browser: Browser;
    let page: Page;

    beforeAll(async () => {
      if (!fs.existsSync(CHROMIUM))
        throw new Error(`${CHROMIUM} is missing: run \`npm run setup-engines\` (npm test does) to install Debian's chromium`);
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: [
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
        ],
      });
      page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    });

    afterAll(async () => {
      await browser?.close();
    });

    it('asks for the token, then shows the plugin, the volume and the alloc, and updates when the alloc stops', async () => {
      // A name that is markup: the page must show it as text.
      const hostile = '<img src=x onerror="window.__pwned=1">';
      await h.api.createVolume(
        volumeSpecToDocument(
          await parseVolumeSpec(
            volumeSpec('vol-xss').replace('name         = "vol-xss"', `name = ${JSON.stringify(hostile)}`),
            'vol-xss.hcl',
          ),
        ),
      );
      const pageErrors: string[] = [];
      page.on('pageerror', (e) => pageErrors.push(e.message));
      // A content policy violation shows as a console error.
      page.on('console', (m) => {
        if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) pageErrors.push(m.text());
      });
      // A plugin gone between the list and its read: the list the page gets names one more, which the agent answers 404 for.
      await page.route('**/v1/plugins?type=csi', async (route) => {
        const answer = await route.fetch();
        if (!answer.ok()) return route.fulfill({ response: answer });
        const stubs = (await answer.json()) as { ID: string }[];
        await route.fulfill({ response: answer, json: [...stubs, { ...stubs[0], ID: 'gone-plugin' }] });
      });
      await page.goto(`http://127.0.0.1:${h.port}/ui/`);
      // No token yet: the page asks for one and shows no data.
      await page.locator('#login').waitFor({ state: 'visible' });
      await page.fill('#token', 'not-the-token');
      await page.click('#login button');
      await page.locator('#login-error').filter({ hasText: 'not valid' }).waitFor();
      await page.fill('#token', TOKEN);
      await page.click('#login button');

      const plugins = page.locator('#plugins tbody tr');
      await plugins.filter({ hasText: 'hostpath' }).first().waitFor();
      const cells = plugins.filter({ hasText: 'hostpath' }).locator('td');
      await pollUntil('the plugin shown healthy', async () => ((await cells.nth(4).innerText()) === 'healthy' ? true : undefined), 30_000);
      expect(await cells.nth(2).innerText()).toBe('1/1');
      expect(await cells.nth(3).innerText()).toBe('1/1');
      expect(await plugins.filter({ hasText: 'gone-plugin' }).count()).toBe(0);
      expect(await page.locator('#error').isHidden()).toBe(true);
      const xss = page.locator('#volumes tbody tr', { hasText: 'vol-xss' });
      await xss.waitFor();
      expect(await xss.locator('td').nth(1).innerText()).toBe(hostile);
      expect(await page.locator('#volumes img').count()).toBe(0);
      expect(await page.evaluate(() => (globalThis as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
      await page
        .locator('#volumes tbody tr', { hasText: 'vol-ui' })
        .filter({ hasText: `write by ${workloadAlloc.slice(0, 8)}` })
        .waitFor();
      const allocRow = page.locator(`#allocs tbody tr[data-alloc="${workloadAlloc}"]`);
      await allocRow.filter({ hasText: 'running' }).waitFor();
      await allocRow.filter({ hasText: 'Started' }).waitFor();
      await page.locator('#live.on').waitFor();
      fs.mkdirSync(OUTPUT, { recursive: true });
      await page.screenshot({ path: path.join(OUTPUT, 'running.png'), fullPage: true });

      // The workload stops: the feed and the tables follow without a reload.
      await h.api.stopJob('workload');
      await allocRow.filter({ hasText: 'complete' }).waitFor({ timeout: 30_000 });
      await page.locator('#volumes tbody tr', { hasText: 'vol-ui' }).filter({ hasText: 'none' }).waitFor({ timeout: 30_000 });
      await page.locator('#events li', { hasText: 'Alloc complete' }).first().waitFor();
      await page.screenshot({ path: path.join(OUTPUT, 'after-stop.png'), fullPage: true });
      expect(pageErrors).toEqual([]);
    });
  });
});
