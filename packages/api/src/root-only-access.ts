// Who may use an API that asks for no ACL token: root on this machine only.
// The API starts processes as the agent's user (root) and reads the volumes'
// state, so without a token to tell operators apart, the only caller it can
// trust is one who is root already — the owner of the connecting socket, as
// the kernel lists it (proc-net-tcp.ts). Anyone else is told to configure a
// token or to run as root.
import { ApiError, ApiErrorCode } from './api-error';

/** The uid that may call a token-less API. */
export const ROOT_UID = 0;

/**
 * Why a request on a connection whose client socket is owned by `uid`
 * (undefined: not a socket of this machine) may not use a token-less API,
 * or undefined when it may.
 */
export function tokenlessRefusal(uid: number | undefined): string | undefined {
  if (uid === ROOT_UID) return undefined;
  const who =
    uid === undefined ? 'a client that is not a local process of this machine (another host or network namespace)' : `uid ${uid}, not root`;
  return (
    `this agent's API has no ACL token, so it serves only root on this machine (it starts processes as root and holds volume secrets); this connection comes from ${who}: ` +
    'run the command as root, or set acl { token = "…" } in the agent config and send it (the CLI: -token, or the NOMAD_TOKEN or CSIPLUG_TOKEN environment variable)'
  );
}

/** tokenlessRefusal as the API's 403. */
export function assertTokenlessAccess(uid: number | undefined): void {
  const refusal = tokenlessRefusal(uid);
  if (refusal !== undefined) throw new ApiError(403, ApiErrorCode.Forbidden, refusal);
}
