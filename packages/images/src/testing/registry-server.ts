// A real registry for tests: Debian's docker-registry (distribution 2.8) on
// 127.0.0.1 with a free port, filesystem storage in a temp dir, TLS with a
// throwaway CA made by openssl (server cert for IP:127.0.0.1 and
// DNS:localhost), htpasswd basic auth (bcrypt), and a Docker certs.d dir
// for clients. Images go in with skopeo. The registry's access log is kept,
// so a test counts the requests a client made. stop() kills it and removes
// everything.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import * as https from 'node:https';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from './run';

const REGISTRY = '/usr/bin/docker-registry';
const SKOPEO = '/usr/bin/skopeo';
const OPENSSL = '/usr/bin/openssl';

export interface TestRegistryOptions {
  /** Basic auth user; "tester" by default. */
  readonly username?: string;
  readonly password?: string;
}

export interface AccessLogEntry {
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly userAgent: string;
}

/** A source skopeo can copy from: a tag in an OCI layout, or an archive file. */
export type PushSource =
  { readonly layoutDir: string; readonly tag: string } | { readonly archive: string; readonly format: 'oci-archive' | 'docker-archive' };

export class TestRegistry {
  private readonly output: string[] = [];
  private stopped = false;
  private markers = 0;

  private constructor(
    /** The temp dir holding everything (storage, certs, config). */
    readonly dir: string,
    /** host:port, e.g. 127.0.0.1:40123. */
    readonly host: string,
    /** Docker's certs.d layout for clients: <certsDir>/<host>/ca.crt. */
    readonly certsDir: string,
    readonly caCertPath: string,
    readonly storageDir: string,
    readonly username: string,
    readonly password: string,
    private readonly child: ChildProcess,
  ) {
    const collect = (chunk: Buffer) => this.output.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
  }

  static async start(options: TestRegistryOptions = {}): Promise<TestRegistry> {
    const dir = await mkdtemp(join(tmpdir(), 'images-registry-'));
    try {
      const username = options.username ?? 'tester';
      const password = options.password ?? 'test-password-1';
      const port = await freePort();
      const host = `127.0.0.1:${port}`;
      const tlsDir = join(dir, 'tls');
      await mkdir(tlsDir);
      await makeCertificates(tlsDir);
      const certsDir = join(dir, 'certs.d');
      await mkdir(join(certsDir, host), { recursive: true });
      await writeFile(join(certsDir, host, 'ca.crt'), readFileSync(join(tlsDir, 'ca.crt')));
      const hash = (
        await run(
          '/usr/bin/python3',
          ['-W', 'ignore', '-c', 'import crypt,sys; print(crypt.crypt(sys.stdin.read(), crypt.mksalt(crypt.METHOD_BLOWFISH)))'],
          { input: password },
        )
      ).trim();
      await writeFile(join(dir, 'htpasswd'), `${username}:${hash}\n`);
      const storageDir = join(dir, 'storage');
      await mkdir(storageDir);
      await writeFile(join(dir, 'config.yml'), registryConfig({ host, storageDir, tlsDir, htpasswd: join(dir, 'htpasswd') }));
      const child = spawn(REGISTRY, ['serve', join(dir, 'config.yml')], { stdio: ['ignore', 'pipe', 'pipe'] });
      const registry = new TestRegistry(dir, host, certsDir, join(tlsDir, 'ca.crt'), storageDir, username, password, child);
      try {
        await registry.waitReady();
      } catch (err) {
        await registry.stop();
        throw err;
      }
      return registry;
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /** Trusts this registry's CA for another host:port too (a proxy in front of it). */
  async trustFor(hostPort: string, certsDir = this.certsDir): Promise<void> {
    await mkdir(join(certsDir, hostPort), { recursive: true });
    await writeFile(join(certsDir, hostPort, 'ca.crt'), readFileSync(this.caCertPath));
  }

  /** Copies an image in with `skopeo copy` (all platforms of an index). */
  async push(source: PushSource, repoTag: string): Promise<void> {
    const from = 'layoutDir' in source ? `oci:${source.layoutDir}:${source.tag}` : `${source.format}:${source.archive}`;
    await run(SKOPEO, [
      '--insecure-policy',
      'copy',
      '--all',
      '--quiet',
      '--dest-cert-dir',
      join(this.certsDir, this.host),
      '--dest-creds',
      `${this.username}:${this.password}`,
      from,
      `docker://${this.host}/${repoTag}`,
    ]);
  }

  /** Where the registry keeps blob `digest`'s bytes (to alter it in a test). */
  blobDataPath(digest: string): string {
    const hex = digest.replace(/^sha256:/, '');
    return join(this.storageDir, 'docker', 'registry', 'v2', 'blobs', 'sha256', hex.slice(0, 2), hex, 'data');
  }

  /** The basic-auth credentials a client presents to this registry. */
  get credentials(): { username: string; password: string } {
    return { username: this.username, password: this.password };
  }

  /** The requests `userAgent` made (all clients' when absent) while `fn` ran, from the access log. */
  async requestsDuring(fn: () => Promise<unknown>, userAgent?: string): Promise<AccessLogEntry[]> {
    await this.syncAccessLog();
    const before = this.accessLog(userAgent).length;
    await fn();
    await this.syncAccessLog();
    return this.accessLog(userAgent).slice(before);
  }

  /** The access log so far, parsed; `userAgent` narrows it to one client. */
  accessLog(userAgent?: string): AccessLogEntry[] {
    const out: AccessLogEntry[] = [];
    for (const line of this.output) {
      const m = /"([A-Z]+) (\S+) HTTP\/[0-9.]+" (\d{3}) \S+ "[^"]*" "([^"]*)"/.exec(line);
      if (!m) continue;
      const entry = { method: m[1]!, path: m[2]!, status: Number(m[3]), userAgent: m[4]! };
      if (userAgent === undefined || entry.userAgent.startsWith(userAgent)) out.push(entry);
    }
    return out;
  }

  /**
   * Waits until every request made before this call is in the access log:
   * sends a marker request and waits for its line.
   */
  async syncAccessLog(timeoutMs = 15_000): Promise<void> {
    const marker = `/v2/csiplug-marker-${++this.markers}/tags/list`;
    await this.get(marker, 'csiplug-test-marker');
    const deadline = Date.now() + timeoutMs;
    while (!this.accessLog('csiplug-test-marker').some((e) => e.path === marker)) {
      if (Date.now() > deadline)
        throw new Error(`the registry's access log never showed ${marker}; output:\n${this.output.slice(-20).join('\n')}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** The registry's output (logs), for a failing test's message. */
  logs(): string {
    return this.output.join('\n');
  }

  async stop(): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      if (this.child.exitCode === null && this.child.signalCode === null) {
        const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
        this.child.kill('SIGTERM');
        const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
    }
    await rm(this.dir, { recursive: true, force: true });
  }

  private get(path: string, userAgent: string): Promise<number> {
    const [hostname, port] = this.host.split(':');
    return new Promise((resolve, reject) => {
      const req = https.get(
        { hostname, port: Number(port), path, ca: readFileSync(this.caCertPath), headers: { 'user-agent': userAgent }, agent: false },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
    });
  }

  private async waitReady(): Promise<void> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      if (this.child.exitCode !== null) throw new Error(`docker-registry exited with ${this.child.exitCode}:\n${this.logs()}`);
      try {
        const status = await this.get('/v2/', 'csiplug-test-ready');
        if (status === 401 || status === 200) return;
      } catch {
        // Not listening yet.
      }
      if (Date.now() > deadline) throw new Error(`docker-registry did not answer on ${this.host} within 30s:\n${this.logs()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

function registryConfig(o: { host: string; storageDir: string; tlsDir: string; htpasswd: string }): string {
  return [
    'version: 0.1',
    'log:',
    '  level: warn',
    '  formatter: text',
    '  accesslog:',
    '    disabled: false',
    'storage:',
    '  filesystem:',
    `    rootdirectory: ${o.storageDir}`,
    '  delete:',
    '    enabled: true',
    'http:',
    `  addr: ${o.host}`,
    '  secret: csiplug-test-secret',
    '  tls:',
    `    certificate: ${join(o.tlsDir, 'server.crt')}`,
    `    key: ${join(o.tlsDir, 'server.key')}`,
    'auth:',
    '  htpasswd:',
    '    realm: csiplug-test',
    `    path: ${o.htpasswd}`,
    '',
  ].join('\n');
}

/** A throwaway CA and a server certificate for 127.0.0.1/localhost signed by it. */
export async function makeCertificates(dir: string): Promise<void> {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await run(OPENSSL, [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    join(dir, 'ca.key'),
    '-out',
    join(dir, 'ca.crt'),
    '-days',
    '2',
    '-subj',
    '/CN=csiplug test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  await run(OPENSSL, ['req', ...ec, '-keyout', join(dir, 'server.key'), '-out', join(dir, 'server.csr'), '-subj', '/CN=127.0.0.1']);
  await writeFile(
    join(dir, 'server.ext'),
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n',
  );
  await run(OPENSSL, [
    'x509',
    '-req',
    '-in',
    join(dir, 'server.csr'),
    '-CA',
    join(dir, 'ca.crt'),
    '-CAkey',
    join(dir, 'ca.key'),
    '-CAcreateserial',
    '-out',
    join(dir, 'server.crt'),
    '-days',
    '2',
    '-extfile',
    join(dir, 'server.ext'),
  ]);
}

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
