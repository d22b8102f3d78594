// The agent on Nomad's wire: its health (command/agent/agent_endpoint.go
// healthResponse, api/agent.go AgentHealthResponse) and itself (AgentSelf:
// config, member, stats), and the health back into csiplug's AgentHealth.
// A csiplug agent is its own client and server (it takes jobs and runs
// them), so its health answers both parts. Pure functions: the routes
// encode, the ApiClient decodes.
import { ApiError, ApiErrorCode } from '../api-error';
import type { AgentHealth, NodeView } from '../service';

/**
 * The `Csiplug` field of an answer the client reads csiplug's view from, or
 * a clear error when the answer has none (a Nomad agent, or not an agent of
 * this API at all).
 */
export function csiplugField<T>(wire: unknown, route: string): T {
  const extras = typeof wire === 'object' && wire !== null ? (wire as { Csiplug?: unknown }).Csiplug : undefined;
  if (typeof extras !== 'object' || extras === null)
    throw new ApiError(
      0,
      ApiErrorCode.BadResponse,
      `the answer to ${route} has no Csiplug field: the address is not a csiplug agent (a Nomad agent answers without it); point the client at a csiplug agent's API`,
    );
  return extras as T;
}

/** Nomad's AgentHealth (api/agent.go). */
export interface NomadAgentHealth {
  ok: boolean;
  message: string;
}

/** What csiplug adds to the health answer: the agent's own counts. */
export type AgentHealthExtras = Omit<AgentHealth, 'ok'>;

/** Nomad's AgentHealthResponse (api/agent.go); 500 when either part is not ok, as Nomad answers. */
export interface NomadAgentHealthResponse {
  /** Left out when `?type=server` asks for the server part alone. */
  client?: NomadAgentHealth;
  /** Left out when `?type=client` asks for the client part alone. */
  server?: NomadAgentHealth;
  Csiplug: AgentHealthExtras;
}

/** The parts of Nomad's health answer (its `?type=client&type=server`; none given: both; only other types: neither, 200 `{}`). */
export type HealthPart = 'client' | 'server';

/** Nomad's AgentMember (api/agent.go), as far as csiplug knows it: no gossip, so no address, port or protocol versions. */
export interface NomadAgentMember {
  Name: string;
  Status: 'alive' | 'left';
  /** As a Nomad server's gossip tags: the build, region and datacenter (`nomad server members` reads them). */
  Tags: Record<string, string>;
}

/** Nomad's version.VersionInfo in the agent's config. */
export interface NomadVersionInfo {
  Version: string;
  VersionPrerelease: string;
  VersionMetadata: string;
}

/** Nomad's AgentSelf (api/agent.go): config holds the agent config keys csiplug has. */
export interface NomadAgentSelf {
  config: {
    Region?: string;
    Datacenter?: string;
    NodeName: string;
    DataDir: string;
    Version: NomadVersionInfo;
    Client: { Enabled: true };
    Server: { Enabled: true };
  };
  member: NomadAgentMember;
  stats: Record<string, Record<string, string>>;
}

const NOT_OK = 'the agent is shutting down; retry against the next agent';

export function encodeAgentHealth(
  health: AgentHealth,
  parts: readonly HealthPart[] = ['client', 'server'],
): { status: 200 | 500; body: NomadAgentHealthResponse } {
  const { ok, ...extras } = health;
  const part: NomadAgentHealth = { ok, message: ok ? 'ok' : NOT_OK };
  return {
    // As Nomad: 500 only when a part answered is not ok.
    status: ok || parts.length === 0 ? 200 : 500,
    body: {
      ...(parts.includes('client') ? { client: { ...part } } : {}),
      ...(parts.includes('server') ? { server: { ...part } } : {}),
      Csiplug: { ...extras, allocs: { ...extras.allocs }, plugins: { ...extras.plugins } },
    },
  };
}

export function decodeAgentHealth(wire: NomadAgentHealthResponse): AgentHealth {
  const extras = csiplugField<AgentHealthExtras>(wire, 'GET /v1/agent/health');
  return {
    ok: (wire.client ?? wire.server)?.ok === true && wire.client?.ok !== false && wire.server?.ok !== false,
    nodeId: extras.nodeId,
    dataDir: extras.dataDir,
    version: extras.version,
    startedAt: extras.startedAt,
    allocs: { ...extras.allocs },
    plugins: { ...extras.plugins },
  };
}

/** The agent as Nomad's AgentSelf, from its health and its node. */
export function encodeAgentSelf(health: AgentHealth, node: NodeView): NomadAgentSelf {
  const tags: Record<string, string> = { build: health.version, role: 'nomad' };
  if (node.region !== undefined) tags.region = node.region;
  if (node.datacenter !== undefined) tags.dc = node.datacenter;
  return {
    config: {
      ...(node.region !== undefined ? { Region: node.region } : {}),
      ...(node.datacenter !== undefined ? { Datacenter: node.datacenter } : {}),
      NodeName: node.name,
      DataDir: health.dataDir,
      Version: { Version: health.version, VersionPrerelease: '', VersionMetadata: '' },
      Client: { Enabled: true },
      Server: { Enabled: true },
    },
    member: { Name: node.name, Status: health.ok ? 'alive' : 'left', Tags: tags },
    stats: {
      client: {
        node_id: health.nodeId,
        num_allocations: String(health.allocs.running + health.allocs.pending + health.allocs.dead),
      },
    },
  };
}

/**
 * Nomad's GET /v1/status/leader: the leader's RPC address as a JSON string.
 * A csiplug agent leads itself and has no RPC port: its HTTP API's
 * `host:port` is the address that takes its writes.
 */
export function encodeStatusLeader(apiUrl: string | undefined): string {
  return apiUrl === undefined ? '' : new URL(apiUrl).host;
}
