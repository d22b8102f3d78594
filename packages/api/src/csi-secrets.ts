// Nomad's per-call CSI secrets on the wire: the `X-Nomad-CSI-Secrets` header,
// `key=value` pairs joined by commas (api/csi.go SetHeadersFromCSISecrets;
// command/agent/csi_endpoint.go parseCSISecrets). Nomad's snapshot delete and
// list and its volume delete send their secrets only this way; a snapshot
// create carries them in its body (CSISnapshot.Secrets). As in Nomad, a pair
// without "=" is skipped, and a value cannot hold a comma.
export const CSI_SECRETS_HEADER = 'X-Nomad-CSI-Secrets';

/** The secrets a header value carries; undefined when it carries none. */
export function parseCsiSecrets(header: string | readonly string[] | undefined): Record<string, string> | undefined {
  const text = Array.isArray(header) ? header.join(',') : (header as string | undefined);
  if (!text) return undefined;
  const out: Record<string, string> = {};
  for (const pair of text.split(',')) {
    const eq = pair.indexOf('=');
    if (eq < 0) continue;
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return Object.keys(out).length ? out : undefined;
}

/** The header value for `secrets` (undefined when there are none to send). */
export function formatCsiSecrets(secrets: Record<string, string> | undefined): string | undefined {
  const pairs = Object.entries(secrets ?? {}).map(([k, v]) => `${k}=${v}`);
  return pairs.length ? pairs.join(',') : undefined;
}
