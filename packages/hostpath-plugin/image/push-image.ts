// Puts a built image in a registry with Debian's skopeo:
// `skopeo copy oci:<layout>:<tag> docker://<registry/repo:tag>`, TLS and
// credentials as skopeo takes them (--dest-cert-dir: a directory with the
// registry's ca.crt, Docker's certs.d/<host:port> layout; --dest-creds
// user:password). Without them skopeo uses the system CAs and
// ${XDG_RUNTIME_DIR}/containers/auth.json or ~/.docker/config.json, as
// `skopeo login` or `docker login` left them.
import { execFile } from 'node:child_process';
import { ImageBuildError } from './errors';

export const SKOPEO = '/usr/bin/skopeo';

export interface PushOptions {
  readonly layoutDir: string;
  readonly tag: string;
  /** registry/repo:tag, e.g. registry.example.com:5000/csi/hostpath:0.1.0 (no docker:// prefix). */
  readonly destination: string;
  readonly destCertDir?: string;
  /** user:password */
  readonly destCreds?: string;
}

/** The skopeo arguments for `options` (credentials included: never log them). */
export function skopeoCopyArgs(options: PushOptions): string[] {
  const dest = options.destination.replace(/^docker:\/\//, '');
  if (!/^[^/\s]+\/\S+$/.test(dest))
    throw new ImageBuildError(
      `--push ${options.destination}: give registry/repository[:tag], e.g. registry.example.com:5000/csi/hostpath:1.0`,
    );
  return [
    'copy',
    '--quiet',
    ...(options.destCertDir !== undefined ? ['--dest-cert-dir', options.destCertDir] : []),
    ...(options.destCreds !== undefined ? ['--dest-creds', options.destCreds] : []),
    `oci:${options.layoutDir}:${options.tag}`,
    `docker://${dest}`,
  ];
}

export function pushImage(options: PushOptions): Promise<void> {
  const args = skopeoCopyArgs(options);
  return new Promise((resolve, reject) => {
    execFile(SKOPEO, args, { maxBuffer: 16 << 20 }, (err, _stdout, stderr) => {
      if (!err) return resolve();
      const detail = String(stderr || err.message).trim();
      reject(
        new ImageBuildError(
          `skopeo copy of ${options.layoutDir}:${options.tag} to docker://${options.destination} failed: ${detail}` +
            (/x509|certificate/.test(detail) ? '; give the registry CA with --dest-cert-dir <dir holding ca.crt>' : '') +
            (/unauthorized|authentication required/i.test(detail) ? '; give --dest-creds user:password or run skopeo login first' : ''),
          { cause: err },
        ),
      );
    });
  });
}
