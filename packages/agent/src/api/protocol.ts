// What the HTTP API's server and client agree on beyond the service's views:
// the token header and the shapes the API adds of its own.

/** The header that carries the ACL token. */
export const TOKEN_HEADER = 'X-Csiplug-Token';

/** The answer of GET /v1/allocation/:id/logs/:task. */
export interface AllocLogs {
  allocId: string;
  task: string;
  stream: 'stdout' | 'stderr';
  /** The byte offset the data starts at. */
  offset: number;
  /** The offset to ask for next, to read on from where this left off. */
  nextOffset: number;
  data: string;
}

/** The answer of DELETE /v1/volume/csi/:id and DELETE /v1/volume/csi/:id/delete. */
export interface VolumeDeleted {
  id: string;
}
