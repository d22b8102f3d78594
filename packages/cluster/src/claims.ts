// Volume claims cluster-wide, in etcd: one key per volume (claims/<id>)
// holding every claim on it, each with the node that holds it. A claim is
// one transaction: read the key and its revision, check the access mode
// against every claim in it (the local catalog's rules, plus the node rule
// below), then write only if the key's revision is still the one read. Two
// nodes racing for a single-node-writer volume: exactly one write commits;
// the other reads again, sees the winner's claim, and is refused.
//
// Across nodes, "single-node" means one node: a volume with a single-node
// access mode may be claimed only by allocs on the node that holds it now.
// Multi-node modes may be claimed anywhere, within their writer rules.
import { ValidationError } from '@csiplug/core';
import {
  ClaimError,
  checkClaim,
  claimModeOf,
  type VolumeCapability,
  type VolumeClaimRequest,
  type VolumeClaimView,
} from '@csiplug/volumes';
import { isEtcdAway, type EtcdConnection } from './connect';

export interface ClusterClaim extends VolumeClaimView {
  /** The node the claiming alloc runs on (its name). */
  nodeId: string;
  /**
   * The identity of that node (the id kept in its agent's data dir,
   * node-identity.ts); absent on a claim written before identities: unknown,
   * never taken for this node's.
   */
  nodeIdentity?: string;
  /**
   * The controller-publish state: the volume was published (ControllerPublishVolume)
   * to this CSI node id for the claim, with this context. Any node with a
   * controller of the plugin can unpublish it from there (a node that never
   * comes back).
   */
  published?: { csiNodeId: string; context: Record<string, string> };
}

interface ClaimsValue {
  claims: ClusterClaim[];
}

/** How many times a claim reads again after another node wrote first, before it gives up (retryable). */
export const CLAIM_CONFLICT_RETRIES = 16;

const CLAIMS = 'claims/';
/** The node registry's lease-bound key of a live node (node-registry.ts). */
const ALIVE = 'alive/';

/** The node rule, after the local catalog's: a single-node mode is held by one node at a time. */
export function checkClusterClaim(
  volume: { id: string; capabilities: readonly VolumeCapability[] },
  claims: readonly ClusterClaim[],
  request: VolumeClaimRequest,
  nodeId: string,
  nodeIdentity?: string,
): void {
  // What the request itself gets wrong first (a capability the volume lacks, a write on a read-only mode),
  // then the node rule (the clearer word when another node holds it), then the writer rules.
  checkClaim({ id: volume.id, capabilities: volume.capabilities, claims: [] }, request);
  checkNode(volume.id, claims, request, nodeId, nodeIdentity);
  checkClaim({ id: volume.id, capabilities: volume.capabilities, claims }, request);
}

function checkNode(
  volumeId: string,
  claims: readonly ClusterClaim[],
  request: VolumeClaimRequest,
  nodeId: string,
  nodeIdentity: string | undefined,
): void {
  if (!request.accessMode.startsWith('single-node-')) return;
  // The same name under another known identity is another machine (a name taken over after a purge): another node.
  const otherMachine = (c: ClusterClaim) => nodeIdentity !== undefined && c.nodeIdentity !== undefined && c.nodeIdentity !== nodeIdentity;
  const elsewhere = claims.filter((c) => c.allocId !== request.allocId && (c.nodeId !== nodeId || otherMachine(c)));
  if (elsewhere.length > 0) {
    const holders = [...new Set(elsewhere.map((c) => c.nodeId))].join(', ');
    throw new ClaimError(
      `volume "${volumeId}" (${request.accessMode}) is claimed on node ${holders} by alloc ${elsewhere.map((c) => c.allocId).join(', ')}; ` +
        `a single-node volume is used on one node at a time: alloc ${request.allocId} on node ${nodeId} can claim it once they release it`,
      true,
    );
  }
}

export class EtcdVolumeClaims {
  constructor(
    private readonly conn: EtcdConnection,
    private readonly now: () => number = Date.now,
    /** This agent's node identity, recorded on every claim it makes (absent: a reader, or a tool that claims for no node of its own). */
    private readonly identity?: string,
  ) {}

  /** Every claim on the volume, cluster-wide. */
  async claims(volumeId: string): Promise<ClusterClaim[]> {
    return (await this.read(volumeId)).value.claims;
  }

  /**
   * Claims the volume for the alloc on `nodeId`, in one transaction; throws
   * ClaimError (retryable when a holder may let go) when the access mode
   * refuses it. Claiming again with the same alloc replaces its claim.
   */
  async claim(
    volume: { id: string; capabilities: readonly VolumeCapability[] },
    request: VolumeClaimRequest,
    nodeId: string,
  ): Promise<ClusterClaim[]> {
    if (request.volumeId !== volume.id)
      throw new ValidationError(`claim of volume "${request.volumeId}" checked against volume "${volume.id}"`);
    return this.update(volume.id, (claims) => {
      checkClusterClaim(volume, claims, request, nodeId, this.identity);
      // The same alloc on the same node again (a claim asserted after a restart): its controller-publish state and start stay.
      const same = claims.find((c) => c.allocId === request.allocId && c.nodeId === nodeId);
      const mine: ClusterClaim = {
        allocId: request.allocId,
        nodeId,
        ...(this.identity !== undefined ? { nodeIdentity: this.identity } : {}),
        mode: claimModeOf(request),
        accessMode: request.accessMode,
        attachmentMode: request.attachmentMode,
        since: same?.since ?? this.now(),
        ...(same?.published ? { published: same.published } : {}),
      };
      return [...claims.filter((c) => c.allocId !== request.allocId), mine];
    });
  }

  /** Records that the alloc's claim was published to `csiNodeId` (the controller-publish state); a claim that is gone is left gone. */
  async markPublished(volumeId: string, allocId: string, published: NonNullable<ClusterClaim['published']>): Promise<void> {
    await this.update(volumeId, (claims) =>
      claims.map((c) =>
        c.allocId === allocId ? { ...c, published: { csiNodeId: published.csiNodeId, context: { ...published.context } } } : c,
      ),
    );
  }

  /** Releases the alloc's claim; a claim that is gone is not an error. */
  async release(volumeId: string, allocId: string): Promise<ClusterClaim[]> {
    return this.update(volumeId, (claims) => claims.filter((c) => c.allocId !== allocId));
  }

  /**
   * Every volume's claims, cluster-wide, in one read. A key whose claims
   * cannot be read is listed in `unreadable` (its holders are unknown: no
   * one may take it as free).
   */
  async all(): Promise<Array<{ volumeId: string; claims: ClusterClaim[] }>> {
    return (await this.allWithUnreadable()).volumes;
  }

  async allWithUnreadable(): Promise<{ volumes: Array<{ volumeId: string; claims: ClusterClaim[] }>; unreadable: string[] }> {
    const res = await etcdCall('*', () => this.conn.kv.getAll().prefix(CLAIMS).exec());
    const volumes: Array<{ volumeId: string; claims: ClusterClaim[] }> = [];
    const unreadable: string[] = [];
    for (const kv of res.kvs) {
      const volumeId = kv.key.toString().slice(CLAIMS.length);
      const claims = parseClaims(kv.value.toString());
      if (claims) volumes.push({ volumeId, claims });
      else unreadable.push(volumeId);
    }
    return { volumes, unreadable };
  }

  /**
   * Releases every claim a node holds (a node gone for good); returns the
   * volumes touched. Each write also requires the node to have no live
   * lease: a node that came back keeps what it holds. A volume whose claims
   * cannot be read is left as it is (and the others released).
   */
  async releaseNode(nodeId: string): Promise<string[]> {
    const { volumes } = await this.allWithUnreadable();
    const touched: string[] = [];
    for (const { volumeId, claims } of volumes) {
      if (!claims.some((c) => c.nodeId === nodeId)) continue;
      const after = await this.update(volumeId, (cs) => cs.filter((c) => c.nodeId !== nodeId), ALIVE + nodeId);
      if (!after.some((c) => c.nodeId === nodeId)) touched.push(volumeId);
    }
    return touched;
  }

  private async read(volumeId: string): Promise<{ value: ClaimsValue; modRevision: string | undefined }> {
    const res = await etcdCall(volumeId, () => this.conn.kv.get(CLAIMS + volumeId).exec());
    const kv = res.kvs[0];
    if (!kv) return { value: { claims: [] }, modRevision: undefined };
    const claims = parseClaims(kv.value.toString());
    // Never written over: a record no one can read is a fault to see, not a volume free to claim.
    if (!claims)
      throw new ClaimError(
        `the claims of volume "${volumeId}" in etcd cannot be read (not a list of claims with alloc, node and modes); fix or delete the key ${CLAIMS}${volumeId}`,
        false,
      );
    return { value: { claims }, modRevision: kv.mod_revision };
  }

  /** Read, change, and write only if no one wrote in between; reads again after a lost race. */
  private async update(volumeId: string, change: (claims: ClusterClaim[]) => ClusterClaim[], absentKey?: string): Promise<ClusterClaim[]> {
    const key = CLAIMS + volumeId;
    for (let attempt = 1; attempt <= CLAIM_CONFLICT_RETRIES; attempt++) {
      const { value, modRevision } = await this.read(volumeId);
      const next = change(value.claims);
      // Nothing to change (a release of a claim that is gone): no write, no new revision for others to trip on.
      if (JSON.stringify(next) === JSON.stringify(value.claims)) return next;
      const txn = modRevision === undefined ? this.conn.kv.if(key, 'Create', '==', 0) : this.conn.kv.if(key, 'Mod', '==', modRevision);
      if (absentKey !== undefined) txn.and(absentKey, 'Create', '==', 0);
      const res = await etcdCall(volumeId, () =>
        txn.then(this.conn.kv.put(key).value(JSON.stringify({ claims: next } satisfies ClaimsValue))).commit(),
      );
      if (res.succeeded) return next;
      if (absentKey !== undefined && (await etcdCall(volumeId, () => this.conn.kv.get(absentKey).exists()))) return value.claims;
    }
    throw new ClaimError(
      `volume "${volumeId}": its claims changed under ${CLAIM_CONFLICT_RETRIES} attempts in a row (other nodes claiming at once); try again`,
      true,
    );
  }
}

/** A claims value as written by this module, or undefined when it is anything else (no claim of it is trusted then). */
function parseClaims(text: string): ClusterClaim[] | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  const claims = (value as { claims?: unknown } | null)?.claims;
  if (!Array.isArray(claims)) return undefined;
  const str = (x: unknown) => typeof x === 'string' && x.length > 0;
  const publishedOk = (p: ClusterClaim['published'] | undefined) =>
    p === undefined ||
    (p !== null &&
      typeof p === 'object' &&
      str(p.csiNodeId) &&
      p.context !== null &&
      typeof p.context === 'object' &&
      Object.values(p.context).every((v) => typeof v === 'string'));
  const ok = claims.every(
    (c: Partial<ClusterClaim> | null) =>
      c !== null &&
      typeof c === 'object' &&
      str(c.allocId) &&
      str(c.nodeId) &&
      (c.nodeIdentity === undefined || str(c.nodeIdentity)) &&
      (c.mode === 'read' || c.mode === 'write') &&
      str(c.accessMode) &&
      str(c.attachmentMode) &&
      publishedOk(c.published),
  );
  return ok ? (claims as ClusterClaim[]) : undefined;
}

/**
 * An etcd call of a claim: etcd away (no quorum, a member gone, a deadline
 * passed) is a retryable ClaimError that says so — the claim waits and is
 * tried again; it is never taken for a refusal or a grant.
 */
async function etcdCall<T>(volumeId: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (err instanceof ClaimError) throw err;
    const e = err instanceof Error ? err : new Error(String(err));
    if (!isEtcdAway(e)) {
      // Not an outage (a refused certificate, a permission): waiting will not help; say what etcd said.
      throw new ClaimError(`volume "${volumeId}": the cluster's etcd refused the claim's call: ${e.message}`, false, {
        cause: err,
        code: 'ECLAIM_ETCD_REFUSED',
      });
    }
    throw new ClaimError(
      `volume "${volumeId}": the cluster's etcd did not answer (${e.message}); the claim waits and is tried again`,
      true,
      { cause: err, code: 'ECLAIM_ETCD_UNAVAILABLE' },
    );
  }
}
