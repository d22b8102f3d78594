// The agent's health through Nomad's AgentHealthResponse and back, its
// AgentSelf, and the leader's address.
import type { AgentHealth, NodeView } from '../service';
import { type NomadAgentHealthResponse, decodeAgentHealth, encodeAgentHealth, encodeAgentSelf, encodeStatusLeader } from './agent-wire';
import { type NomadNode, type NomadNodePurgeResponse, decodeNode, decodeNodePurge } from './node-wire';

const HEALTH: AgentHealth = {
  ok: true,
  nodeId: 'node-1a2b',
  dataDir: '/var/lib/csiplug',
  version: '0.1.0',
  startedAt: 1_733_325_000_123,
  allocs: { running: 2, pending: 1, dead: 3 },
  plugins: { healthy: 1, total: 2 },
};

describe("the agent on Nomad's wire", () => {
  it('health comes back as it was, ok or not; not ok is a 500 as Nomad answers', () => {
    for (const health of [
      HEALTH,
      { ...HEALTH, ok: false, allocs: { running: 0, pending: 0, dead: 0 }, plugins: { healthy: 0, total: 0 } },
    ]) {
      const { status, body } = encodeAgentHealth(health);
      expect(status).toBe(health.ok ? 200 : 500);
      expect(body.client?.ok).toBe(health.ok);
      expect(body.server?.ok).toBe(health.ok);
      expect(decodeAgentHealth(JSON.parse(JSON.stringify(body)) as NomadAgentHealthResponse)).toEqual(health);
    }
    expect(encodeAgentHealth(HEALTH).body.client).toEqual({ ok: true, message: 'ok' });
    // ?type=client: the client part alone, as Nomad answers it.
    const clientOnly = encodeAgentHealth(HEALTH, ['client']).body;
    expect(clientOnly.server).toBeUndefined();
    expect(decodeAgentHealth(clientOnly)).toEqual(HEALTH);
  });

  it("self carries the config keys and member tags Nomad's tools read", () => {
    const node = { name: 'host-a', datacenter: 'dc2', region: 'eu' } as NodeView;
    const self = encodeAgentSelf(HEALTH, node);
    expect(self.config).toMatchObject({ Region: 'eu', Datacenter: 'dc2', NodeName: 'host-a', Version: { Version: '0.1.0' } });
    expect(self.member).toEqual({ Name: 'host-a', Status: 'alive', Tags: { build: '0.1.0', role: 'nomad', region: 'eu', dc: 'dc2' } });
    expect(self.stats.client).toEqual({ node_id: 'node-1a2b', num_allocations: '6' });
  });

  it("the leader is the agent's own API host:port", () => {
    expect(encodeStatusLeader('http://127.0.0.1:4646')).toBe('127.0.0.1:4646');
    expect(encodeStatusLeader('https://[::1]:4646')).toBe('[::1]:4646');
    expect(encodeStatusLeader(undefined)).toBe('');
  });

  it('an answer without Csiplug (a Nomad agent) is a clear error, not a TypeError', () => {
    const nomads = { client: { ok: true, message: 'ok' }, server: { ok: true, message: 'ok' } };
    expect(() => decodeAgentHealth(nomads as unknown as NomadAgentHealthResponse)).toThrow(
      expect.objectContaining({
        code: 'EBAD_RESPONSE',
        message: expect.stringMatching(/has no Csiplug field: the address is not a csiplug agent/),
      }),
    );
    expect(() => decodeNode({ ID: 'n', Name: 'n' } as unknown as NomadNode)).toThrow(/GET \/v1\/node\/self has no Csiplug field/);
    expect(() => decodeNodePurge({ EvalIDs: [] } as unknown as NomadNodePurgeResponse)).toThrow(/has no Csiplug field/);
    expect(encodeAgentHealth({ ...HEALTH, ok: false }, [])).toEqual({ status: 200, body: { Csiplug: expect.any(Object) } });
  });
});
