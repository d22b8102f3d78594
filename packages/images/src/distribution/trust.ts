// TLS trust for a registry, as Docker's: the system's CA store plus the
// CAs an operator put in <certsDir>/<host:port>/*.crt (Docker's
// /etc/docker/certs.d by default), and a client certificate pair
// (*.cert + *.key) when one is there. Verification is never turned off.
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { join } from 'node:path';

export const DEFAULT_CERTS_DIR = '/etc/docker/certs.d';
/** Debian's, Fedora's and Alpine's system CA bundles; the first that exists is used. */
const SYSTEM_CA_BUNDLES = ['/etc/ssl/certs/ca-certificates.crt', '/etc/pki/tls/certs/ca-bundle.crt', '/etc/ssl/cert.pem'];

export interface RegistryTls {
  readonly ca: string[];
  readonly cert?: string;
  readonly key?: string;
}

let systemCas: string[] | undefined;

function systemCaBundle(): string[] {
  if (systemCas) return systemCas;
  const out = [...rootCertificates];
  for (const file of SYSTEM_CA_BUNDLES) {
    try {
      out.push(readFileSync(file, 'utf8'));
      break;
    } catch {
      // Not this distribution's path; Node's own roots are still there.
    }
  }
  systemCas = out;
  return out;
}

/** The trust for `host` (host[:port] as in the reference). */
export function registryTls(host: string, certsDir: string): RegistryTls {
  const ca = [...systemCaBundle()];
  const dir = join(certsDir, host.replace(/[/\\]/g, '_'));
  let entries: string[] = [];
  try {
    entries = readdirSync(dir).sort();
  } catch {
    return { ca };
  }
  let cert: string | undefined;
  let key: string | undefined;
  for (const name of entries) {
    const file = join(dir, name);
    if (name.endsWith('.crt')) ca.push(readFileSync(file, 'utf8'));
    else if (name.endsWith('.cert')) {
      cert = readFileSync(file, 'utf8');
      key = readFileSync(file.replace(/\.cert$/, '.key'), 'utf8');
    }
  }
  return { ca, ...(cert !== undefined && key !== undefined ? { cert, key } : {}) };
}

/**
 * What `registryTls(host, certsDir)` would read now, as a short stamp: each
 * file of the host's certs.d dir with its inode, size and change time
 * ("none" without the dir). Docker reads the dir at each pull; a cached TLS
 * context is made again when its stamp changes (a ca.crt the operator just
 * put there, as a TLS error tells them to, is used by the next request).
 */
export function registryTrustStamp(host: string, certsDir: string): string {
  const dir = join(certsDir, host.replace(/[/\\]/g, '_'));
  try {
    return readdirSync(dir)
      .sort()
      .map((name) => {
        const st = statSync(join(dir, name));
        return `${name}:${st.ino}:${st.size}:${st.ctimeMs}`;
      })
      .join('|');
  } catch {
    return 'none';
  }
}
