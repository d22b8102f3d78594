// A VolumeClaimer for tests: a map of volumes, every claim and release
// recorded, claims refused (retryably) on demand, releases failed on demand,
// and a claim or release made to hang — before its work, or after it (a call
// the catalog carried out whose answer never came back) — until its signal
// aborts or the test lets it go.
import { settleOnce } from '@csiplug/core';
import {
  ClaimError,
  type ClaimableVolume,
  type VolumeClaimRequest,
  type VolumeClaimResult,
  type VolumeClaimer,
} from '../catalog/volume-claimer';

/** A call made to hang: the test waits for it, then lets it go (or aborts its signal). */
export interface FakeClaimHang {
  /** Resolves once the call hangs. */
  readonly reached: Promise<void>;
  /** Lets the call go on and finish as it would have. */
  release(): void;
}

interface Hang {
  after: boolean;
  reached: () => void;
  released: Promise<void>;
}

export class FakeClaimer implements VolumeClaimer {
  readonly volumes = new Map<string, ClaimableVolume>();
  /** Every claim asked (refused ones too), in order. */
  readonly claims: VolumeClaimRequest[] = [];
  /** Every release carried out, as `<volume> <alloc>`, in order. */
  readonly releases: string[] = [];
  /** Claims refused (retryably) before one is granted. */
  refuseNext = 0;
  /** Releases that fail before one succeeds. */
  failReleases = 0;
  /** While set, a stale mount may not be brought back up (remountRefusal answers it). */
  remountRefused: string | undefined;
  /** The publish context a granted claim returns. */
  publishContext: Record<string, string> | undefined = { attached: 'yes' };
  private readonly hangs: Record<'claim' | 'release', Hang[]> = { claim: [], release: [] };

  remountRefusal(): string | undefined {
    return this.remountRefused;
  }

  add(id: string, pluginId = 'hostpath'): void {
    this.volumes.set(id, { id, externalId: `ext-${id}`, pluginId });
  }

  /** The next claim or release hangs (before its work, or after it with `after`) until its signal aborts or the test releases it. */
  hangNext(call: 'claim' | 'release', options: { after?: boolean } = {}): FakeClaimHang {
    let reached!: () => void;
    let release!: () => void;
    const reachedP = new Promise<void>((r) => (reached = r));
    const released = new Promise<void>((r) => (release = r));
    this.hangs[call].push({ after: options.after ?? false, reached, released });
    return { reached: reachedP, release };
  }

  async lookup(volumeId: string): Promise<ClaimableVolume> {
    const v = this.volumes.get(volumeId);
    if (!v)
      throw new ClaimError(
        `volume "${volumeId}" is not registered; register it ("csiplug volume register FILE") or create it ("csiplug volume create FILE")`,
        false,
      );
    return v;
  }

  async claim(request: VolumeClaimRequest, options: { signal?: AbortSignal } = {}): Promise<VolumeClaimResult> {
    options.signal?.throwIfAborted();
    this.claims.push(request);
    const hang = this.hangs.claim.shift();
    if (hang && !hang.after) await this.hang(hang, options.signal);
    if (this.refuseNext > 0) {
      this.refuseNext--;
      throw new ClaimError(`volume ${request.volumeId} has no free write claim`, true);
    }
    const volume = await this.lookup(request.volumeId);
    if (hang?.after) await this.hang(hang, options.signal);
    return this.publishContext ? { volume, publishContext: { ...this.publishContext } } : { volume };
  }

  async release(volumeId: string, allocId: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const hang = this.hangs.release.shift();
    if (hang && !hang.after) await this.hang(hang, options.signal);
    if (this.failReleases > 0) {
      this.failReleases--;
      throw new Error(`controller plugin is not running, so volume "${volumeId}" stays published for alloc ${allocId}`);
    }
    this.releases.push(`${volumeId} ${allocId}`);
    if (hang?.after) await this.hang(hang, options.signal);
  }

  private hang(hang: Hang, signal: AbortSignal | undefined): Promise<void> {
    hang.reached();
    // Until the test releases it, or the signal aborts (with its reason).
    return settleOnce<void>((wait) => void hang.released.then(() => wait.resolve()), { signal });
  }
}
