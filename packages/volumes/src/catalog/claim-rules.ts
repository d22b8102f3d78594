// Who may claim a volume, by CSI access mode (Nomad's names). All claims here
// are on this one node, so "single-node" limits how many allocs may write,
// not where they run (the cluster's claims keep a single-node mode on one
// node). single-node-single-writer is one writer alloc and single-node-multi-
// writer any number of them, as Nomad means them for its host volumes and
// CSI defines SINGLE_NODE_SINGLE_WRITER / SINGLE_NODE_MULTI_WRITER:
//   single-node-writer, single-node-single-writer, multi-node-single-writer
//       one write claim at a time, any number of read claims
//   single-node-reader-only, multi-node-reader-only
//       read claims only
//   multi-node-multi-writer, single-node-multi-writer
//       anything
// While a volume is claimed, new claims must use the same access and
// attachment mode as the claims it has (the plugin published it that way).
// A refusal that goes away once another alloc lets go is retryable (the
// holder may be stopping; Nomad retries too); one that no wait can fix is not.
import { SINGLE_WRITER_ACCESS_MODES } from '@csiplug/core';
import { ClaimError, type VolumeClaimRequest } from './volume-claimer';
import type { VolumeCapability } from './volume-spec';
import type { VolumeClaimView } from './volume-view';

export type ClaimMode = VolumeClaimView['mode'];

/** Access modes under which a volume can only be read. */
export const READ_ONLY_ACCESS_MODES: readonly string[] = Object.freeze(['single-node-reader-only', 'multi-node-reader-only']);
/** Access modes that allow one writer at a time: core's vocabulary (the jobspec orders replacements by it), re-exported where it was. */
export { SINGLE_WRITER_ACCESS_MODES };

export function claimModeOf(request: Pick<VolumeClaimRequest, 'readOnly'>): ClaimMode {
  return request.readOnly ? 'read' : 'write';
}

function describeCapability(c: { accessMode: string; attachmentMode: string }): string {
  return `${c.accessMode}/${c.attachmentMode}`;
}

function allocs(claims: readonly VolumeClaimView[]): string {
  return claims.map((c) => c.allocId).join(', ');
}

/**
 * Throws a ClaimError unless `request` may be granted next to `claims` (the
 * volume's current claims; the requesting alloc's own is ignored, so a
 * re-claim is judged like a first claim).
 */
export function checkClaim(
  volume: { id: string; capabilities: readonly VolumeCapability[]; claims: readonly VolumeClaimView[] },
  request: VolumeClaimRequest,
): void {
  const { id } = volume;
  const offered = volume.capabilities.some((c) => c.accessMode === request.accessMode && c.attachmentMode === request.attachmentMode);
  if (!offered) {
    throw new ClaimError(
      `volume "${id}" has no capability with access mode "${request.accessMode}" and attachment mode "${request.attachmentMode}" ` +
        `(alloc ${request.allocId} asked for it); the volume offers ${volume.capabilities.map(describeCapability).join(', ')}: ` +
        `change the volume request or add a capability block to the volume`,
      false,
    );
  }
  const mode = claimModeOf(request);
  if (mode === 'write' && READ_ONLY_ACCESS_MODES.includes(request.accessMode)) {
    throw new ClaimError(
      `volume "${id}": access mode "${request.accessMode}" allows read-only claims only, and alloc ${request.allocId} asked to write; set read_only = true on the volume request`,
      false,
    );
  }

  const others = volume.claims.filter((c) => c.allocId !== request.allocId);
  const different = others.filter((c) => c.accessMode !== request.accessMode || c.attachmentMode !== request.attachmentMode);
  if (different.length > 0) {
    const first = different[0]!;
    throw new ClaimError(
      `volume "${id}" is in use by alloc${different.length > 1 ? 's' : ''} ${allocs(different)} as ${describeCapability(first)}; ` +
        `alloc ${request.allocId} asked for ${describeCapability(request)}, which has to wait until they release it`,
      true,
    );
  }
  if (mode === 'write' && SINGLE_WRITER_ACCESS_MODES.includes(request.accessMode)) {
    const writers = others.filter((c) => c.mode === 'write');
    if (writers.length > 0) {
      throw new ClaimError(
        `volume "${id}" (${request.accessMode}) allows one writer at a time and alloc ${allocs(writers)} holds the write claim; ` +
          `alloc ${request.allocId} can claim it once that alloc stops`,
        true,
      );
    }
  }
}
