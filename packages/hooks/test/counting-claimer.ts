// A tiny IVolumeClaimer for integration tests: a fixed catalog (volume id →
// the plugin's own id) that counts claims and releases. It outlives agent
// incarnations, as the real volume catalog does.
import { ClaimError, type ClaimableVolume, type VolumeClaimRequest, type VolumeClaimResult, type VolumeClaimer } from '@csiplug/volumes';

export class CountingClaimer implements VolumeClaimer {
  private readonly volumes = new Map<string, ClaimableVolume>();
  readonly claims: VolumeClaimRequest[] = [];
  readonly releases: { volumeId: string; allocId: string }[] = [];

  /** Adds a volume the plugin created; `externalId` is the plugin's CSI volume_id. */
  add(id: string, externalId: string, pluginId = 'hostpath'): void {
    this.volumes.set(id, { id, externalId, pluginId });
  }

  async lookup(volumeId: string): Promise<ClaimableVolume> {
    const volume = this.volumes.get(volumeId);
    if (!volume) throw new ClaimError(`volume ${volumeId} is not in the test catalog`, false);
    return volume;
  }

  async claim(request: VolumeClaimRequest): Promise<VolumeClaimResult> {
    this.claims.push(request);
    return { volume: await this.lookup(request.volumeId) };
  }

  async release(volumeId: string, allocId: string): Promise<void> {
    this.releases.push({ volumeId, allocId });
  }
}
