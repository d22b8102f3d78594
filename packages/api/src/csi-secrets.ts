// Nomad's per-call CSI secrets on the wire: the `X-Nomad-CSI-Secrets` header,
// `key=value` pairs joined by commas (api/csi.go SetHeadersFromCSISecrets;
// command/agent/csi_endpoint.go parseCSISecrets). Nomad's snapshot delete and
// list and its volume delete send their secrets only this way; a snapshot
// create carries them in its body (CSISnapshot.Secrets). As in Nomad, only
// the first such header counts (Go's Header.Get), a pair without "=" is
// skipped, and a key cannot hold "," or "=" nor a value ",": such a secret
// is refused before it is sent, never sent mangled.
import { ValidationError } from '@csiplug/core';

export const CSI_SECRETS_HEADER = 'X-Nomad-CSI-Secrets';

/**
 * The secrets a header value carries; undefined when it carries none. Given
 * every value of a repeated header (Node's headersDistinct), only the first
 * counts, as Nomad reads it. A map without a prototype: "__proto__" is a key like any other.
 */
export function parseCsiSecrets(header: string | readonly string[] | undefined): Record<string, string> | undefined {
  const text = typeof header === 'string' ? header : header?.[0];
  if (!text) return undefined;
  const out: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const pair of text.split(',')) {
    const eq = pair.indexOf('=');
    if (eq < 0) continue;
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return Object.keys(out).length ? out : undefined;
}

/** The header value for `secrets` (undefined when there are none to send). */
export function formatCsiSecrets(secrets: Record<string, string> | undefined): string | undefined {
  // Which secret is not said: its key may be a secret pasted in the wrong place.
  if (Object.entries(secrets ?? {}).some(([k, v]) => /[,=]/.test(k) || v.includes(',')))
    throw new ValidationError(
      `a secret of this call cannot be sent in the ${CSI_SECRETS_HEADER} header: a key may not hold "," or "=", nor a value ","; give the secret without them`,
      'secrets',
    );
  const pairs = Object.entries(secrets ?? {}).map(([k, v]) => `${k}=${v}`);
  return pairs.length ? pairs.join(',') : undefined;
}
