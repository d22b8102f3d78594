// The join decision under a node name: a live holder refuses another
// identity and lets its own restarted agent take over; a record of another
// (or unknown) identity refuses while the name holds claims or placements,
// and gives the name up once it holds none.
import { NodeNameHeldError, decideNodeJoin, type NodeJoinFacts } from './node-identity';

const ME = '11111111-1111-4111-8111-111111111111';
const OTHER = '22222222-2222-4222-8222-222222222222';

const facts = (over: Partial<NodeJoinFacts> = {}): NodeJoinFacts => ({
  name: 'n1',
  identity: ME,
  aliveHolder: undefined,
  record: undefined,
  foreignClaims: 0,
  unknownClaims: 0,
  adoptsUnknown: false,
  placements: 0,
  ...over,
});

describe('decideNodeJoin', () => {
  it('joins a name no one has used', () => {
    expect(decideNodeJoin(facts())).toEqual({ kind: 'join' });
  });

  it('takes its own node over while the lease of its last run is alive, and refuses another live identity (or an unreadable one)', () => {
    expect(decideNodeJoin(facts({ aliveHolder: ME, record: { identity: ME }, foreignClaims: 3 }))).toEqual({ kind: 'take-over' });
    // A record from before identities, its alive key naming this data dir's id: this agent's own last run.
    expect(decideNodeJoin(facts({ aliveHolder: ME, record: {} }))).toEqual({ kind: 'take-over' });
    expect(decideNodeJoin(facts({ aliveHolder: OTHER, record: { identity: OTHER } }))).toEqual({ kind: 'refuse-live', holder: OTHER });
    expect(decideNodeJoin(facts({ aliveHolder: '' }))).toEqual({ kind: 'refuse-live', holder: 'unknown' });
  });

  it('rejoins its own record after its lease ran out, whatever the name holds', () => {
    expect(decideNodeJoin(facts({ record: { identity: ME }, foreignClaims: 2, placements: 4 }))).toEqual({ kind: 'join' });
  });

  it('refuses a record of another identity while the name holds claims or placements, naming that identity', () => {
    expect(decideNodeJoin(facts({ record: { identity: OTHER }, foreignClaims: 1 }))).toEqual({
      kind: 'refuse-held',
      holder: OTHER,
      claims: 1,
      placements: 0,
    });
    expect(decideNodeJoin(facts({ record: { identity: OTHER }, placements: 2 }))).toEqual({
      kind: 'refuse-held',
      holder: OTHER,
      claims: 0,
      placements: 2,
    });
  });

  it('treats a record written before identities as another identity for an agent whose id was made at this start: refused while it holds work', () => {
    expect(decideNodeJoin(facts({ record: {}, unknownClaims: 1, placements: 1 }))).toEqual({
      kind: 'refuse-held',
      holder: undefined,
      claims: 1,
      placements: 1,
    });
    expect(decideNodeJoin(facts({ record: {} }))).toEqual({ kind: 'join' });
    // Claims of unknown identity with no record at all still keep a new machine out.
    expect(decideNodeJoin(facts({ unknownClaims: 2 }))).toEqual({ kind: 'refuse-held', holder: undefined, claims: 2, placements: 0 });
  });

  it('adopts a record and claims written before identities when its id predates this start (an upgraded node down past its TTL), never over a known other identity', () => {
    expect(decideNodeJoin(facts({ adoptsUnknown: true, record: {}, unknownClaims: 3, placements: 2 }))).toEqual({ kind: 'join' });
    expect(decideNodeJoin(facts({ adoptsUnknown: true, record: {}, foreignClaims: 1 }))).toEqual({
      kind: 'refuse-held',
      holder: undefined,
      claims: 1,
      placements: 0,
    });
    expect(decideNodeJoin(facts({ adoptsUnknown: true, record: { identity: OTHER }, unknownClaims: 1 }))).toEqual({
      kind: 'refuse-held',
      holder: OTHER,
      claims: 1,
      placements: 0,
    });
    // No record: nothing to adopt; claims of unknown identity still stand.
    expect(decideNodeJoin(facts({ adoptsUnknown: true, unknownClaims: 1 }))).toEqual({
      kind: 'refuse-held',
      holder: undefined,
      claims: 1,
      placements: 0,
    });
  });

  it('takes a name over from another identity that holds nothing under it (its claims released, its slots moved, or purged)', () => {
    expect(decideNodeJoin(facts({ record: { identity: OTHER } }))).toEqual({ kind: 'join' });
  });

  it('refuses a name with no record while claims of another identity stand under it (placements need a record to count)', () => {
    expect(decideNodeJoin(facts({ foreignClaims: 1 }))).toEqual({ kind: 'refuse-held', holder: undefined, claims: 1, placements: 0 });
    expect(decideNodeJoin(facts({ placements: 3 }))).toEqual({ kind: 'join' });
  });
});

describe('NodeNameHeldError', () => {
  it('says which identity holds the name, what it holds, and to run node purge', () => {
    const err = new NodeNameHeldError('n1', OTHER, ME, 1, 2);
    expect(err.code).toBe('ENODE_NAME_HELD');
    expect(err.message).toContain(`node name "n1" belongs to node identity ${OTHER}, not to this agent (node identity ${ME}`);
    expect(err.message).toContain('1 claim(s) and 2 placement(s)');
    expect(err.message).toContain('csiplug node purge n1');
    expect(new NodeNameHeldError('n1', undefined, ME, 1, 0).message).toContain(
      'unknown identity (its record was written before node identities)',
    );
  });
});
