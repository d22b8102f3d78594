// What an HttpApi is made with (the agent's config gives most of it) and
// what its /v1/metrics serves. Split from http-api.ts, which serves them.
import type { Clock, Logger } from '@csiplug/core';
import type * as net from 'net';
import type { ConnectionLimits } from './connection-gate';
import type { StatusPage } from './status-page';

export interface HttpApiOptions {
  /** An IP address; the agent's config defaults it to 127.0.0.1. */
  bindAddr: string;
  /** 0 picks a free port; listen() says which. */
  port: number;
  /** When set, every request must carry it in X-Nomad-Token (or as Authorization: Bearer). */
  aclToken?: string;
  /**
   * Serve a non-loopback address without a token or without TLS anyway
   * (config `acl { insecure_allow_public = true }`). Off by default: such
   * an API lets anyone who reaches it run processes as the agent's user.
   */
  insecureAllowPublic?: boolean;
  /** Serve HTTPS with this certificate and key (PEM files). */
  tls?: { certFile: string; keyFile: string };
  /** Host names besides the bound address and localhost that requests may name. */
  allowedHosts?: readonly string[];
  /** Origins besides the agent's own whose pages may call the API. */
  allowedOrigins?: readonly string[];
  /** Connection caps and idle time; defaults in DEFAULT_CONNECTION_LIMITS. */
  limits?: Partial<ConnectionLimits>;
  /** Larger request bodies are refused with 400. Default 1 MiB. */
  maxBodyBytes?: number;
  logger: Logger;
  /** Drives the event stream's heartbeat and the idle timers. Default: the wall clock. */
  clock?: Clock;
  /** Default 10 s. */
  eventHeartbeatMs?: number;
  /** What all event streams together may hold unread before the one holding the most is cut off. Default EVENT_STREAMS_MAX_BUFFER_TOTAL (16 MiB). */
  eventStreamsMaxBuffered?: number;
  /** How long dispose() lets requests in progress finish before cutting them. Default 10 s. */
  closeGraceMs?: number;
  /** What /v1/metrics serves (the agent's PromMetrics); without it the path answers 404. */
  metrics?: MetricsSource;
  /** The status page's files (/ui/); the package's own by default. */
  statusPage?: StatusPage;
  /**
   * The uid owning the client end of an accepted connection (undefined: not
   * a local process); asked once per connection while there is no token.
   * Default: looked up in /proc/net/tcp and tcp6.
   */
  peerUid?: (socket: net.Socket) => number | undefined;
}

/** The figures /v1/metrics serves. */
export interface MetricsSource {
  json(): Promise<unknown>;
  prometheus(): Promise<string>;
  readonly contentType: string;
}
