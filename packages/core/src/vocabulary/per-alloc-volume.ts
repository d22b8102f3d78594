// Nomad's per_alloc volumes: a group's `volume` block with `per_alloc =
// true` asks each alloc for a volume of its own, whose id is the block's
// `source` with the alloc's index in brackets (`${NOMAD_ALLOC_INDEX}`), so
// source "db" with count 3 names db[0], db[1] and db[2]. The one place that
// turns a request and an alloc index into the volume id it mounts.
import type { VolumeRequest } from './volume-request';

/** The id of the volume alloc `index` of a per_alloc request for `source` mounts: `db` and 2 give `db[2]`, as Nomad's AllocName suffix. */
export function perAllocVolumeId(source: string, index: number): string {
  return `${source}[${index}]`;
}

/** The volume id the alloc at `index` mounts for `request`: its own (`source[index]`) when per_alloc, else `source`. */
export function requestedVolumeId(request: Pick<VolumeRequest, 'source' | 'perAlloc'>, index: number): string {
  return request.perAlloc ? perAllocVolumeId(request.source, index) : request.source;
}

/**
 * The group's requests as the alloc at `index` makes them: each per_alloc
 * one with its own volume id as `source` (and per_alloc gone, so it is not
 * suffixed twice). What the alloc's hooks see.
 */
export function requestsOfAlloc(requests: readonly VolumeRequest[], index: number): VolumeRequest[] {
  return requests.map((r) => {
    if (!r.perAlloc) return r;
    const { perAlloc: _perAlloc, ...rest } = r;
    return { ...rest, source: perAllocVolumeId(r.source, index) };
  });
}
