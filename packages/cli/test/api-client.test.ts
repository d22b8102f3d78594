// ApiClient over real sockets: it waits as long as the agent takes unless
// given a timeout (timed on an injected clock here), and it speaks https
// against a server with a self-signed certificate made by openssl, trusting
// it only when told to.
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as http from 'http';
import * as https from 'https';
import type { AddressInfo, Socket } from 'net';
import * as os from 'os';
import * as path from 'path';
import { ApiClient, ClientErrorCode, HttpApi } from '@csiplug/api';
import { FakeAgentService } from '@csiplug/api/testing';
import type { AgentEvent } from '@csiplug/api';
import { main } from '../src';
import type { CliIo } from '../src';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** A server on 127.0.0.1:0 that destroys every socket it saw when disposed (an unanswered request would hold the server's close() open). */
async function serve(handler: Handler, tlsOptions?: { key: Buffer; cert: Buffer }): Promise<{ url: string; dispose(): Promise<void> }> {
  const server = tlsOptions ? https.createServer(tlsOptions, handler) : http.createServer(handler);
  const sockets = new Set<Socket>();
  server.on(tlsOptions ? 'secureConnection' : 'connection', (s) => sockets.add(s));
  server.on('connection', (s) => sockets.add(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `${tlsOptions ? 'https' : 'http'}://127.0.0.1:${port}`,
    dispose: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Resolves when the server has received a request, so a test moves its clock only once the call is really waiting. */
function arrivals(): { handler: (then: Handler) => Handler; next(): Promise<http.IncomingMessage> } {
  let waiters: ((req: http.IncomingMessage) => void)[] = [];
  return {
    handler: (then) => (req, res) => {
      for (const w of waiters) w(req);
      waiters = [];
      then(req, res);
    },
    next: () => new Promise((resolve) => waiters.push(resolve)),
  };
}

async function cli(argv: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io: CliIo = {
    stdout: { write: (s: string | Uint8Array) => (stdout += s) },
    stderr: { write: (s: string | Uint8Array) => (stderr += s) },
    env,
  };
  const code = await main(argv, io);
  return { code, stdout, stderr };
}

describe('ApiClient timeouts', () => {
  const disposers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const dispose of disposers.splice(0).reverse()) await dispose();
  });

  it('gives up after timeoutMs with a message naming the agent and the time', async () => {
    const seen = arrivals();
    const server = await serve(seen.handler(() => undefined));
    disposers.push(server.dispose);
    const clock = new FakeClock();
    const client = new ApiClient({ address: server.url, timeoutMs: 30_000, clock });
    let settled = false;
    const call = client.stopJob('web').finally(() => (settled = true));
    call.catch(() => undefined);
    await seen.next();
    await clock.advance(29_999);
    expect(settled).toBe(false);
    await clock.advance(1);
    await expect(call).rejects.toMatchObject({
      status: 0,
      code: ClientErrorCode.Timeout,
      message: `no answer from the agent at ${server.url} within 30s (DELETE /v1/job/web); it may still be working on it: raise -timeout, or set it to 0 to wait as long as it takes`,
    });
  });

  it('counts the whole answer: headers alone are not an answer', async () => {
    const seen = arrivals();
    const server = await serve(
      seen.handler((_req, res) => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.write('[');
      }),
    );
    disposers.push(server.dispose);
    const clock = new FakeClock();
    const call = new ApiClient({ address: server.url, timeoutMs: 1500, clock }).listJobs();
    call.catch(() => undefined);
    await seen.next();
    await clock.advance(1500);
    await expect(call).rejects.toMatchObject({
      code: ClientErrorCode.Timeout,
      message: expect.stringMatching(/^no answer from the agent at http:\/\/127\.0\.0\.1:\d+ within 1\.5s /),
    });
  });

  it('for a stream, counts only until it starts', async () => {
    const seen = arrivals();
    let response!: http.ServerResponse;
    const server = await serve(
      seen.handler((_req, res) => {
        response = res;
        res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
        res.flushHeaders();
      }),
    );
    disposers.push(server.dispose);
    const clock = new FakeClock();
    const ac = new AbortController();
    const events = new ApiClient({ address: server.url, timeoutMs: 1000, clock }).events({ signal: ac.signal });
    const first = events.next();
    await seen.next();
    // The deadline is dropped once the answer starts; wait (on I/O, not time) for the headers to arrive.
    for (let i = 0; i < 10_000 && clock.pendingTimers > 0; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(clock.pendingTimers).toBe(0);
    await clock.advance(5000);
    const event: AgentEvent = { index: 1, topic: 'Job', type: 'JobRegistered', time: 1, message: 'late but fine' };
    // Nomad's Events envelope, as the agent sends it (event-wire.ts).
    const wire = {
      Topic: 'Job',
      Type: 'JobRegistered',
      Key: '',
      FilterKeys: [],
      Index: 1,
      Payload: {},
      Csiplug: { time: 1, message: 'late but fine' },
    };
    response.write(`${JSON.stringify({ Index: 1, Events: [wire] })}\n`);
    expect((await first).value).toEqual(event);
    ac.abort();
    await events.return(undefined);
    expect(clock.pendingTimers).toBe(0);
  });

  it('without a timeout, waits past Node’s 5 s socket timeout for a slow agent', async () => {
    // The one real wait in these tests: Node's own 5 s default is what cut the calls off.
    const fake = new FakeAgentService();
    const api = new HttpApi(fake, { bindAddr: '127.0.0.1', port: 0, logger: new MemoryLogger() });
    const { port } = await api.listen();
    disposers.push(() => api.dispose());
    const client = new ApiClient({ address: `http://127.0.0.1:${port}` });
    await client.runJob(
      jobToNomadJson(
        await parseJobspec(
          [
            'job "web" {',
            '  group "app" {',
            '    task "main" {',
            '      driver = "raw_exec"',
            '      config {',
            '        command = "/bin/true"',
            '      }',
            '    }',
            '  }',
            '}',
          ].join('\n'),
          'web.hcl',
        ),
      ),
    );
    let timer: NodeJS.Timeout | undefined;
    let answeredLate = false;
    fake.gate = new Promise(
      (resolve) =>
        (timer = setTimeout(() => {
          answeredLate = true;
          resolve();
        }, 6000)),
    );
    disposers.push(async () => clearTimeout(timer));
    const job = await client.stopJob('web');
    expect(job.status).toBe('dead');
    // The answer came only after the 6 s hold: the call outlived Node's 5 s default.
    expect(answeredLate).toBe(true);
  }, 20_000);
});

describe('ApiClient over https', () => {
  let dir: string;
  let cert: Buffer;
  let key: Buffer;
  let otherCert: Buffer;
  let otherKey: Buffer;
  let server: { url: string; dispose(): Promise<void> };
  let lastPath = '';
  const logBytes = Buffer.concat([Buffer.from('tls log ✓\n'), Buffer.from([0xff, 0x00])]);

  const handler: Handler = (req, res) => {
    lastPath = req.url ?? '';
    if (req.url === '/v1/jobs') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('[]\n');
    } else if (req.url?.startsWith('/v1/event/stream')) {
      res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
      res.write('{}\n');
      // Nomad's Events envelope, as the agent sends it (event-wire.ts).
      res.write(
        `${JSON.stringify({ Index: 7, Events: [{ Topic: 'Node', Type: 'Ready', Key: '', FilterKeys: [], Index: 7, Payload: {}, Csiplug: { time: 1, message: 'over tls' } }] })}\n`,
      );
    } else if (req.url?.startsWith('/v1/client/fs/logs/a1?task=main')) {
      res.writeHead(200, { 'Content-Type': 'text/plain', 'X-Csiplug-Log-Offset': '0', 'X-Csiplug-Log-Size': String(logBytes.length) });
      res.end(logBytes);
    } else {
      // As the agent answers errors: the message as plain text, the code in its header.
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Csiplug-Error-Code': 'ENOT_FOUND' });
      res.end('nope');
    }
  };

  function makeCert(name: string, san: string): { cert: Buffer; key: Buffer } {
    const keyFile = path.join(dir, `${name}.key`);
    const certFile = path.join(dir, `${name}.pem`);
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        keyFile,
        '-out',
        certFile,
        '-subj',
        '/CN=localhost',
        '-addext',
        `subjectAltName=${san}`,
        '-days',
        '1',
      ],
      {
        stdio: 'ignore',
      },
    );
    return { cert: fs.readFileSync(certFile), key: fs.readFileSync(keyFile) };
  }

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-tls-'));
    ({ cert, key } = makeCert('agent', 'DNS:localhost,IP:127.0.0.1'));
    ({ cert: otherCert, key: otherKey } = makeCert('elsewhere', 'DNS:elsewhere.example'));
    server = await serve(handler, { key, cert });
  });

  afterAll(async () => {
    await server?.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('succeeds with the CA that signed the agent’s certificate, by IP and by name', async () => {
    expect(await new ApiClient({ address: server.url, caCert: cert }).listJobs()).toEqual([]);
    expect(await new ApiClient({ address: server.url.replace('127.0.0.1', 'localhost'), caCert: cert }).listJobs()).toEqual([]);
  });

  it('fails without it, naming the certificate problem and what to do', async () => {
    const err = await new ApiClient({ address: server.url }).listJobs().catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 0, code: ClientErrorCode.Tls });
    expect((err as Error).message).toBe(
      `TLS with the agent at ${server.url} failed: the agent's certificate is not trusted: self-signed certificate (DEPTH_ZERO_SELF_SIGNED_CERT); give the CA that signed it with -ca-cert FILE (or CSIPLUG_CACERT), or skip the check with -tls-skip-verify (insecure)`,
    );
    const wrongCa = await new ApiClient({ address: server.url, caCert: otherCert }).listJobs().catch((e: unknown) => e);
    expect((wrongCa as Error).message).toMatch(
      /certificate is not trusted: .*\((DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN)\)/,
    );
  });

  it('fails when the certificate is for another name', async () => {
    const elsewhere = await serve(handler, { key: otherKey, cert: otherCert });
    try {
      const err = await new ApiClient({ address: elsewhere.url, caCert: otherCert }).listJobs().catch((e: unknown) => e);
      expect(err).toMatchObject({ code: ClientErrorCode.Tls });
      expect((err as Error).message).toMatch(
        /not trusted: Hostname\/IP does not match certificate's altnames.*\(ERR_TLS_CERT_ALTNAME_INVALID\)/,
      );
    } finally {
      await elsewhere.dispose();
    }
  });

  it('skips the check with tlsSkipVerify', async () => {
    expect(await new ApiClient({ address: server.url, tlsSkipVerify: true }).listJobs()).toEqual([]);
  });

  it('streams events and raw log bytes over https', async () => {
    const client = new ApiClient({ address: server.url, caCert: cert });
    const ac = new AbortController();
    const events = client.events({ topics: ['Node'], signal: ac.signal });
    expect((await events.next()).value).toMatchObject({ index: 7, message: 'over tls' });
    expect(lastPath).toBe('/v1/event/stream?topic=Node%3A*');
    ac.abort();
    await events.return(undefined);
    const logs = await client.allocLogStream('a1', 'main', { origin: 'end', offset: 2 });
    const chunks: Buffer[] = [];
    for await (const c of logs.stream) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks)).toEqual(logBytes);
    expect(lastPath).toBe('/v1/client/fs/logs/a1?task=main&type=stdout&origin=end&offset=2&plain=true');
  });

  it('says so when the agent does not speak TLS, or speaks only TLS', async () => {
    const plain = await serve(handler);
    try {
      const err = await new ApiClient({ address: plain.url.replace('http:', 'https:') }).listJobs().catch((e: unknown) => e);
      expect(err).toMatchObject({
        code: ClientErrorCode.Tls,
        message: expect.stringMatching(/does the agent serve https .*use an http:\/\/ address/),
      });
    } finally {
      await plain.dispose();
    }
    const err = await new ApiClient({ address: server.url.replace('https:', 'http:') }).listJobs().catch((e: unknown) => e);
    expect((err as Error).message).toMatch(
      /^cannot reach the csiplug agent at http:.*if the agent serves https \(a tls block\), use an https:\/\/ address$/,
    );
  });

  it('the CLI takes -ca-cert, CSIPLUG_CACERT or NOMAD_CACERT, and -tls-skip-verify or CSIPLUG_SKIP_VERIFY', async () => {
    const caFile = path.join(dir, 'agent.pem');
    const env = { CSIPLUG_ADDR: server.url };
    let r = await cli(['job', 'status'], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^Error: TLS with the agent at https:\/\/127\.0\.0\.1:\d+ failed: the agent's certificate is not trusted: self-signed certificate/,
    );
    expect(await cli(['job', 'status', '-ca-cert', caFile], env)).toEqual({ code: 0, stdout: 'No jobs\n', stderr: '' });
    expect((await cli(['job', 'status'], { ...env, CSIPLUG_CACERT: caFile })).code).toBe(0);
    expect((await cli(['job', 'status'], { ...env, NOMAD_CACERT: caFile })).code).toBe(0);
    expect((await cli(['job', 'status', '-tls-skip-verify'], env)).code).toBe(0);
    expect((await cli(['job', 'status'], { ...env, CSIPLUG_SKIP_VERIFY: 'true' })).code).toBe(0);
    r = await cli(['job', 'status', '-tls-skip-verify=false'], { ...env, CSIPLUG_SKIP_VERIFY: 'true' });
    expect(r.code).toBe(1);
  });
});
