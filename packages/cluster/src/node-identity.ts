// Whether an agent may join the cluster under a node name: the decision, as
// a pure function over what etcd holds for the name. A node is its identity
// (a random id kept in the agent's data dir, written in its node record and
// on each claim it makes), not its name: node names default to the host
// name, so cloned machines share one. Another machine under a name is
// refused while the name's agent is alive (its lease), and after that while
// the node record names another identity and the name still holds claims or
// placements — until an operator runs `node purge` — so a second machine
// never takes over (and releases, or mounts) the work of the first.
//
// A record or claim written before identities existed has none: "unknown".
// Unknown is another identity's — except to an agent whose identity was in
// its data dir before this start (`adoptsUnknown`): the agents before
// identities kept the same id there (their alive key named it), so a node
// upgraded while it was down past heartbeat_ttl takes its own name back and
// stamps its record. A machine new to the cluster (its id made at this
// start: a fresh data dir) never adopts one: the case the identity is for.
// An agent restarted within heartbeat_ttl takes its node over by its alive
// key either way.
import { CsiplugError } from '@csiplug/core';

/** What etcd holds for the name when an agent asks to join under it. */
export interface NodeJoinFacts {
  name: string;
  /** The joining agent's identity (from its data dir). */
  identity: string;
  /** The identity in the name's alive key (its lease is current), '' when unreadable; undefined when no one holds it. */
  aliveHolder: string | undefined;
  /** The node record under the name, if any; its identity undefined when written before identities. */
  record: { identity?: string } | undefined;
  /** Claims under the name whose recorded identity is another's (not the joiner's, and known). */
  foreignClaims: number;
  /** Claims under the name that name no identity (written before identities), or whose key no one can read. */
  unknownClaims: number;
  /** The joiner's identity was in its data dir before this start: a record and claims of unknown identity may be its own. */
  adoptsUnknown: boolean;
  /** Alloc slots placed on the name. */
  placements: number;
}

export type NodeJoinDecision =
  | { kind: 'join' }
  /** This agent's last run holds the alive key (restarted within the TTL): taken over under a new lease. */
  | { kind: 'take-over' }
  /** Another live agent holds the name. */
  | { kind: 'refuse-live'; holder: string }
  /** The name's record is another identity's (or unknown), and the name still holds work. */
  | { kind: 'refuse-held'; holder: string | undefined; claims: number; placements: number };

export function decideNodeJoin(f: NodeJoinFacts): NodeJoinDecision {
  if (f.aliveHolder !== undefined)
    return f.aliveHolder === f.identity ? { kind: 'take-over' } : { kind: 'refuse-live', holder: f.aliveHolder || 'unknown' };
  // A record of unknown identity adopted by an agent whose id predates this start: its own, from before identities (its unknown claims too).
  const adopts = f.adoptsUnknown && f.record !== undefined && f.record.identity === undefined;
  if (f.record?.identity === f.identity || adopts) {
    return f.foreignClaims > 0 && adopts
      ? { kind: 'refuse-held', holder: undefined, claims: f.foreignClaims, placements: 0 }
      : { kind: 'join' };
  }
  // No record: placements name a node only through its record, but claims made under the name by another identity still stand.
  const placements = f.record ? f.placements : 0;
  const claims = f.foreignClaims + f.unknownClaims;
  if (claims > 0 || placements > 0) return { kind: 'refuse-held', holder: f.record?.identity, claims, placements };
  return { kind: 'join' };
}

/** The name's node record is another identity's, and its claims or placements stand: the name is not free until `node purge` (the API answers 409). */
export class NodeNameHeldError extends CsiplugError {
  constructor(
    readonly nodeName: string,
    /** The identity the record names; undefined when it was written before node identities. */
    readonly holder: string | undefined,
    identity: string,
    claims: number,
    placements: number,
  ) {
    const who = holder ? `node identity ${holder}` : 'an agent of unknown identity (its record was written before node identities)';
    super(
      'ENODE_NAME_HELD',
      `node name "${nodeName}" belongs to ${who}, not to this agent (node identity ${identity}, from its data dir), and that node still holds ${claims} claim(s) and ${placements} placement(s) in the cluster: ` +
        `two machines under one name would share its single-node volumes. Give this agent its own cluster.node_name; or, if that node is gone for good, run \`csiplug node purge ${nodeName}\` (it releases what it held) and this agent joins then`,
    );
  }
}
