// The API's door: how many connections it holds at once (in all and per
// client address) and how long a connection may sit with no request in
// progress. An idle-connection flood must be refused here, at accept time,
// before it can eat the agent's file descriptors — the ones it needs to
// watch its tasks and talk to its plugins.
//
// Past the cap a few connections (the reserve) are still let in, for a
// short time and for one request each: the agent's own health answers
// there, so a monitor can tell "flooded" from "dead"; every other request
// on them gets 503. A full reserve closes its oldest idle connection to
// make room; when all of them are busy, a new connection is closed at once.
import { type Clock, type Disposable, type Logger } from '@csiplug/core';
import type * as net from 'net';

export interface ConnectionLimits {
  /** Connections held at once, over all clients. */
  maxConnections: number;
  /** Connections held at once from one client address. */
  maxConnectionsPerClient: number;
  /** A connection with no request in progress for this long (ms) is closed, trickling bytes or not. */
  idleTimeoutMs: number;
}

export const DEFAULT_CONNECTION_LIMITS: Readonly<ConnectionLimits> = Object.freeze({
  maxConnections: 256,
  maxConnectionsPerClient: 100,
  idleTimeoutMs: 30_000,
});

/** Connections let in past the cap, for health checks only. */
export const OVERFLOW_RESERVE = 16;
/** How long an overflow connection is safe from eviction by a newer one: ample for a monitor on the same network to send its request, short enough that a flood cannot keep the reserve. */
export const OVERFLOW_GRACE_MS = 100;
/** How long an overflow connection may take for its one request. */
export const OVERFLOW_TIMEOUT_MS = 5_000;
/** How often a flood is reported in the log at most. */
const REFUSAL_LOG_INTERVAL_MS = 30_000;

interface Conn {
  client: string;
  admittedAt: number;
  overflow: boolean;
  inflight: number;
  timer: Disposable | undefined;
}

export type Admission = 'admitted' | 'overflow' | 'refused';

export class ConnectionGate {
  private readonly conns = new Map<net.Socket, Conn>();
  private readonly perClient = new Map<string, number>();
  private regular = 0;
  private overflow = 0;
  private refusedSinceLog = 0;
  private lastRefusalLog = -Infinity;

  constructor(
    readonly limits: ConnectionLimits,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Open connections (regular and overflow). */
  get size(): number {
    return this.conns.size;
  }

  /**
   * Decides on a new connection. `socket` is the one requests will arrive on
   * (for TLS, the TLS socket over `raw`); both are closed on refusal.
   */
  admit(socket: net.Socket, raw: net.Socket = socket): Admission {
    const client = raw.remoteAddress ?? 'unknown';
    const fromClient = this.perClient.get(client) ?? 0;
    let overflow = false;
    if (this.regular >= this.limits.maxConnections || fromClient >= this.limits.maxConnectionsPerClient) {
      // A full reserve makes room by closing its oldest idle connection, so a
      // fresh health check gets in even while a flood keeps arriving.
      if (this.overflow >= OVERFLOW_RESERVE && !this.evictOldestIdleOverflow()) {
        this.refused(client);
        raw.destroy();
        socket.destroy();
        return 'refused';
      }
      overflow = true;
    }
    const conn: Conn = { client, admittedAt: this.clock.now(), overflow, inflight: 0, timer: undefined };
    this.conns.set(socket, conn);
    if (overflow) this.overflow++;
    else {
      this.regular++;
      this.perClient.set(client, fromClient + 1);
    }
    socket.once('close', () => this.release(socket));
    this.armIdle(socket, conn);
    if (overflow) this.refused(client);
    return overflow ? 'overflow' : 'admitted';
  }

  /** Whether a connection came in past the cap (health only). */
  isOverflow(socket: net.Socket): boolean {
    return this.conns.get(socket)?.overflow ?? false;
  }

  requestStarted(socket: net.Socket): void {
    const conn = this.conns.get(socket);
    if (!conn) return;
    conn.inflight++;
    conn.timer?.dispose();
    conn.timer = undefined;
  }

  requestEnded(socket: net.Socket): void {
    const conn = this.conns.get(socket);
    if (!conn) return;
    conn.inflight = Math.max(0, conn.inflight - 1);
    if (conn.inflight === 0) this.armIdle(socket, conn);
  }

  /** Closes every connection with no request in progress (shutdown); `all` closes the busy ones too. */
  closeIdle(all = false): void {
    for (const [socket, conn] of this.conns) if (all || conn.inflight === 0) socket.destroy();
  }

  private evictOldestIdleOverflow(): boolean {
    // Only one that has had its chance: a monitor's fresh connection sends its request at once.
    const before = this.clock.now() - OVERFLOW_GRACE_MS;
    for (const [socket, conn] of this.conns) {
      if (!conn.overflow || conn.inflight > 0 || conn.admittedAt > before) continue;
      this.release(socket);
      socket.destroy();
      return true;
    }
    return false;
  }

  private armIdle(socket: net.Socket, conn: Conn): void {
    conn.timer?.dispose();
    const ms = conn.overflow ? Math.min(OVERFLOW_TIMEOUT_MS, this.limits.idleTimeoutMs) : this.limits.idleTimeoutMs;
    conn.timer = this.clock.setTimeout(() => {
      conn.timer = undefined;
      if (conn.inflight === 0) socket.destroy();
    }, ms);
  }

  private release(socket: net.Socket): void {
    const conn = this.conns.get(socket);
    if (!conn) return;
    this.conns.delete(socket);
    conn.timer?.dispose();
    if (conn.overflow) {
      this.overflow--;
      return;
    }
    this.regular--;
    const left = (this.perClient.get(conn.client) ?? 1) - 1;
    if (left > 0) this.perClient.set(conn.client, left);
    else this.perClient.delete(conn.client);
  }

  private refused(client: string): void {
    this.refusedSinceLog++;
    const now = this.clock.now();
    if (now - this.lastRefusalLog < REFUSAL_LOG_INTERVAL_MS) return;
    this.logger.warn('HTTP API connection limit reached; refusing new connections (health checks still answer)', {
      client,
      refused: this.refusedSinceLog,
      open: this.regular,
      max_connections: this.limits.maxConnections,
      max_connections_per_client: this.limits.maxConnectionsPerClient,
    });
    this.refusedSinceLog = 0;
    this.lastRefusalLog = now;
  }
}
