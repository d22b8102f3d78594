// A real etcd cluster for tests: N members of Debian's etcd-server (v3.4) on
// loopback ports, each with its own data dir. Tests never fake etcd; `npm
// test` installs etcd-server first when it is missing (scripts/setup-engines.sh).
// A member can be killed (-9 included), started again on its data dir, and
// asked who leads; stop() ends every member and removes the dirs.
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';

/** Where Debian's etcd-server puts its binary. */
export const ETCD_BINARY = '/usr/bin/etcd';

interface Member {
  name: string;
  clientPort: number;
  peerPort: number;
  dataDir: string;
  proc: ChildProcess | undefined;
  log: string;
  /** Ended on purpose (kill()): not a member that failed. */
  killed: boolean;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function get(url: string, timeoutMs: number): Promise<{ status: number; body: string } | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    return { status: res.status, body: await res.text() };
  } catch {
    return undefined;
  }
}

export class EtcdTestCluster {
  private readonly members: Member[] = [];
  readonly root: string;

  private constructor(root: string) {
    this.root = root;
  }

  /** Starts `size` members and resolves once the cluster answers with a leader. */
  static async start(size = 3): Promise<EtcdTestCluster> {
    if (!fs.existsSync(ETCD_BINARY))
      throw new Error(`${ETCD_BINARY} is missing: run \`npm run setup-engines\` (npm test does) to install Debian's etcd-server`);
    // A free port is only free until someone takes it (another test's etcd, an outgoing connection): a member
    // that cannot bind exits, and the whole cluster is started again on new ports.
    for (let attempt = 1; ; attempt++) {
      const cluster = new EtcdTestCluster(fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-etcd-')));
      try {
        for (let i = 0; i < size; i++) {
          cluster.members.push({
            name: `m${i}`,
            clientPort: await freePort(),
            peerPort: await freePort(),
            dataDir: path.join(cluster.root, `m${i}`),
            proc: undefined,
            log: '',
            killed: false,
          });
        }
        for (let i = 0; i < size; i++) cluster.spawn(i, 'new');
        await cluster.waitHealthy(30_000, true);
        return cluster;
      } catch (err) {
        await cluster.stop();
        if (attempt >= 3) throw err;
      }
    }
  }

  /** The client URLs of every member, for a client's `endpoints`. */
  get endpoints(): string[] {
    return this.members.map((m) => `http://127.0.0.1:${m.clientPort}`);
  }

  get size(): number {
    return this.members.length;
  }

  endpoint(i: number): string {
    return this.endpoints[i]!;
  }

  private spawn(i: number, state: 'new' | 'existing'): void {
    const m = this.members[i]!;
    const initialCluster = this.members.map((x) => `${x.name}=http://127.0.0.1:${x.peerPort}`).join(',');
    const args = [
      `--name=${m.name}`,
      `--data-dir=${m.dataDir}`,
      `--listen-client-urls=http://127.0.0.1:${m.clientPort}`,
      `--advertise-client-urls=http://127.0.0.1:${m.clientPort}`,
      `--listen-peer-urls=http://127.0.0.1:${m.peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${m.peerPort}`,
      `--initial-cluster=${initialCluster}`,
      `--initial-cluster-state=${state}`,
      `--initial-cluster-token=${path.basename(this.root)}`,
      // Loopback is fast: short heartbeats make a leader election take well under a second.
      '--heartbeat-interval=50',
      '--election-timeout=500',
      '--log-level=warn',
    ];
    const proc = spawn(ETCD_BINARY, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    m.proc = proc;
    m.killed = false;
    m.log = '';
    const keep = (d: Buffer) => {
      m.log = (m.log + d.toString()).slice(-8192);
    };
    proc.stdout!.on('data', keep);
    proc.stderr!.on('data', keep);
  }

  /** Resolves once every running member answers /health with a leader (etcd 3.4: {"health":"true"}). */
  async waitHealthy(timeoutMs = 30_000, everyMember = false): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const running = this.members.filter((m) => this.running(m));
      const dead = this.members.filter((m) => m.proc !== undefined && !m.killed && !this.running(m));
      if (everyMember && dead.length > 0)
        throw new Error(
          `etcd member ${dead.map((m) => m.name).join(', ')} exited at start:\n${dead.map((m) => m.log.slice(-1500)).join('\n')}`,
        );
      const answers = await Promise.all(running.map((m) => get(`http://127.0.0.1:${m.clientPort}/health`, 1_000)));
      if (running.length > 0 && answers.every((a) => a?.status === 200 && /"health":\s*"true"/.test(a.body))) return;
      if (Date.now() > deadline) {
        throw new Error(
          `etcd test cluster not healthy after ${timeoutMs} ms:\n${running.map((m) => `${m.name}: ${m.log.slice(-1500)}`).join('\n')}`,
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  private running(m: Member): boolean {
    return m.proc !== undefined && m.proc.exitCode === null && m.proc.signalCode === null;
  }

  /** The index of the member that leads now (asked of a running member's v3 maintenance status). */
  async leader(): Promise<number> {
    for (const m of this.members.filter((x) => this.running(x))) {
      try {
        const res = await fetch(`http://127.0.0.1:${m.clientPort}/v3/maintenance/status`, {
          method: 'POST',
          body: '{}',
          signal: AbortSignal.timeout(1_000),
        });
        const status = (await res.json()) as { leader?: string; header?: { member_id?: string } };
        if (!status.leader) continue;
        const members = (await (
          await fetch(`http://127.0.0.1:${m.clientPort}/v3/cluster/member/list`, {
            method: 'POST',
            body: '{}',
            signal: AbortSignal.timeout(1_000),
          })
        ).json()) as { members: { ID: string; name: string }[] };
        const name = members.members.find((x) => x.ID === status.leader)?.name;
        const i = this.members.findIndex((x) => x.name === name);
        if (i >= 0) return i;
      } catch {
        // that member is not answering: ask the next
      }
    }
    throw new Error('no running etcd member knows a leader');
  }

  /** Ends member `i` with `signal` (SIGKILL: no goodbye) and waits for it to be gone. */
  async kill(i: number, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const m = this.members[i]!;
    const proc = m.proc;
    if (!proc || !this.running(m)) return;
    const gone = new Promise((r) => proc.once('exit', r));
    m.killed = true;
    proc.kill(signal);
    await gone;
  }

  /** Starts member `i` again on its data dir (it rejoins the cluster). */
  async restart(i: number): Promise<void> {
    if (this.running(this.members[i]!)) return;
    this.spawn(i, 'existing');
    // Every member: one that could not bind its old port again must fail the test here, not leave a cluster of two.
    await this.waitHealthy(30_000, true);
  }

  /** Every member, killed; the data dirs removed. */
  async stop(): Promise<void> {
    await Promise.all(this.members.map((_, i) => this.kill(i)));
    fs.rmSync(this.root, { recursive: true, force: true });
  }
}
