// The token-less API's decision: root's connections only.
import { ApiError } from './api-error';
import { assertTokenlessAccess, tokenlessRefusal } from './root-only-access';

describe('tokenlessRefusal', () => {
  it('lets root in and nobody else, saying who was refused and what to do', () => {
    expect(tokenlessRefusal(0)).toBeUndefined();
    expect(tokenlessRefusal(65534)).toBe(
      "this agent's API has no ACL token, so it serves only root on this machine (it starts processes as root and holds volume secrets); this connection comes from uid 65534, not root: " +
        'run the command as root, or set acl { token = "…" } in the agent config and send it (the CLI: -token, or the NOMAD_TOKEN or CSIPLUG_TOKEN environment variable)',
    );
    expect(tokenlessRefusal(1)).toContain('uid 1, not root');
    expect(tokenlessRefusal(undefined)).toContain(
      'a client that is not a local process of this machine (another host or network namespace)',
    );
  });

  it('is a 403 for the API', () => {
    expect(() => assertTokenlessAccess(0)).not.toThrow();
    let err: unknown;
    try {
      assertTokenlessAccess(1000);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 403, code: 'EFORBIDDEN' });
  });
});
