// The node rule of a cluster-wide claim: a single-node volume is one
// node's at a time, and a node is its identity — the same name under
// another identity (another machine) is another node; a claim without an
// identity (written before identities) goes by its name as before.
import { ClaimError } from '@csiplug/volumes';
import { checkClusterClaim, type ClusterClaim } from './claims';

const volume = { id: 'v1', capabilities: [{ accessMode: 'single-node-writer' as const, attachmentMode: 'file-system' as const }] };
const request = (allocId: string) => ({
  volumeId: 'v1',
  allocId,
  accessMode: 'single-node-writer',
  attachmentMode: 'file-system',
  readOnly: true,
});
const held = (over: Partial<ClusterClaim>): ClusterClaim => ({
  allocId: 'a1',
  nodeId: 'n1',
  mode: 'read',
  accessMode: 'single-node-writer',
  attachmentMode: 'file-system',
  since: 0,
  ...over,
});

describe('checkClusterClaim, the node rule by identity', () => {
  it('refuses a single-node claim on the same name under another identity, naming the holder', () => {
    const err = (() => {
      try {
        checkClusterClaim(volume, [held({ nodeIdentity: 'id-a' })], request('a2'), 'n1', 'id-b');
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(ClaimError);
    expect((err as Error).message).toContain('is claimed on node n1 by alloc a1');
  });

  it('grants it on the same name and identity, and goes by the name for a claim of unknown identity or a claimer with none', () => {
    expect(() => checkClusterClaim(volume, [held({ nodeIdentity: 'id-a' })], request('a2'), 'n1', 'id-a')).not.toThrow();
    expect(() => checkClusterClaim(volume, [held({})], request('a2'), 'n1', 'id-b')).not.toThrow();
    expect(() => checkClusterClaim(volume, [held({ nodeIdentity: 'id-a' })], request('a2'), 'n1')).not.toThrow();
    expect(() => checkClusterClaim(volume, [held({ nodeIdentity: 'id-a' })], request('a2'), 'n2', 'id-a')).toThrow(/claimed on node n1/);
  });
});
