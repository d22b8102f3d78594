// CSI endpoints are unix sockets: "unix:///abs/path" or a bare absolute path.
import * as path from 'node:path';
import { ValidationError } from '@csiplug/core';

export interface CsiEndpoint {
  /** Absolute filesystem path of the socket. */
  socketPath: string;
  /** The grpc-js target, always `unix:///abs/path`... (unix:/abs/path form). */
  target: string;
  /** How the caller wrote it, for messages. */
  original: string;
}

/** Parses `unix:///path`, `unix:/path` or `/path`; anything else is a ValidationError. */
export function parseEndpoint(endpoint: string): CsiEndpoint {
  if (typeof endpoint !== 'string' || endpoint.trim() === '') {
    throw new ValidationError('CSI endpoint is required (unix:///path/to/csi.sock or /path/to/csi.sock)', 'endpoint');
  }
  let p: string;
  if (endpoint.startsWith('unix://')) p = endpoint.slice('unix://'.length);
  else if (endpoint.startsWith('unix:')) p = endpoint.slice('unix:'.length);
  else if (endpoint.includes('://')) {
    throw new ValidationError(
      `CSI endpoint "${endpoint}" is not a unix socket; CSI plugins listen on unix:///path sockets only`,
      'endpoint',
    );
  } else p = endpoint;
  if (!path.isAbsolute(p)) {
    throw new ValidationError(`CSI endpoint "${endpoint}" must name an absolute socket path (unix:///abs/path)`, 'endpoint');
  }
  const socketPath = path.normalize(p);
  return { socketPath, target: `unix:${socketPath}`, original: endpoint };
}
