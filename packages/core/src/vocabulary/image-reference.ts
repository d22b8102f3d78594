// Image references parsed as Docker parses them: `busybox` is
// docker.io/library/busybox:latest, `host:5000/a/b:tag` names a private
// registry, `name@sha256:…` pins a digest (a tag beside it is kept but the
// digest wins). Validation follows the distribution spec's grammar strictly
// (charset, lengths, one `@`), since references come from job files.
// `oci-archive:/path.tar[:tag]` and `docker-archive:/path.tar` are
// recognised as offline sources (parsed here; loading them is not the
// puller's job). Pure, no I/O: the jobspec checks a docker task's `image`
// with it at validate, and @csiplug/images pulls what it names.
import { CsiplugError } from '../errors';
import { parseDigest } from './image-digest';

/** An image reference that is not one (bad charset, too long, empty part). */
export class ImageReferenceError extends CsiplugError {
  constructor(
    readonly reference: string,
    /** What is wrong with it, without the advice the message adds. */
    readonly reason: string,
  ) {
    super(
      'EIMAGE_REFERENCE_INVALID',
      `invalid image reference ${JSON.stringify(reference.length > 300 ? `${reference.slice(0, 300)}…` : reference)}: ${reason}; write it as Docker does, e.g. "busybox:1.36", "registry.example.com:5000/team/app@sha256:<64 hex>" or "oci-archive:/path/image.tar"`,
    );
  }
}

/** An image in a registry. */
export interface RegistryReference {
  readonly kind: 'registry';
  /** The registry as written (normalised: `docker.io` for Docker Hub), with its port if any. */
  readonly registry: string;
  /** The repository path inside the registry, e.g. `library/busybox`. */
  readonly repository: string;
  /** The tag; `latest` when neither a tag nor a digest was written. */
  readonly tag?: string;
  /** The digest when the reference pins one; it wins over the tag. */
  readonly digest?: string;
  /** The full, normalised form: `docker.io/library/busybox:latest`, `host/a@sha256:…`. */
  readonly canonical: string;
}

/** An image in a local archive file (`oci-archive:` or `docker-archive:`). */
export interface ArchiveReference {
  readonly kind: 'oci-archive' | 'docker-archive';
  /** Absolute path of the archive. */
  readonly path: string;
  /** The image inside the archive the reference names after a second `:`, if any. */
  readonly inner?: string;
  readonly canonical: string;
}

export type ImageReference = RegistryReference | ArchiveReference;

export const DOCKER_HUB = 'docker.io';
/** Where Docker Hub's distribution API really answers. */
export const DOCKER_HUB_API_HOST = 'registry-1.docker.io';
/** The key Docker Hub's credentials have in a docker config.json. */
export const DOCKER_HUB_CONFIG_KEY = 'https://index.docker.io/v1/';

const MAX_REFERENCE_LENGTH = 1024;
const MAX_NAME_LENGTH = 255;
const MAX_PATH_LENGTH = 4096;

// The distribution spec's grammar (distribution/reference regexp.go).
const PATH_COMPONENT = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const DOMAIN_COMPONENT = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const DOMAIN = new RegExp(`^(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[[a-fA-F0-9:]+\\])(?::[0-9]{1,5})?$`);
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/** Parses a reference or an archive source; throws ImageReferenceError naming the fault. */
export function parseImageReference(input: string): ImageReference {
  if (typeof input !== 'string') throw new ImageReferenceError(String(input), 'not a string');
  if (input.startsWith('oci-archive:')) return parseArchive(input, 'oci-archive');
  if (input.startsWith('docker-archive:')) return parseArchive(input, 'docker-archive');
  return parseRegistryReference(input);
}

/** Parses a registry reference (no archive transports). */
export function parseRegistryReference(input: string): RegistryReference {
  if (typeof input !== 'string') throw new ImageReferenceError(String(input), 'not a string');
  if (input.length === 0) throw new ImageReferenceError(input, 'it is empty');
  if (input.length > MAX_REFERENCE_LENGTH) throw new ImageReferenceError(input, `longer than ${MAX_REFERENCE_LENGTH} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f]/.test(input)) throw new ImageReferenceError(input, 'it contains whitespace or control characters');
  if (/^[a-f0-9]{64}$/.test(input)) {
    throw new ImageReferenceError(input, 'a bare 64-hex string is an image id, not a reference; write name@sha256:<hex>');
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(input)) throw new ImageReferenceError(input, 'a URL scheme is not part of a reference');

  const at = input.indexOf('@');
  if (at >= 0 && input.indexOf('@', at + 1) >= 0) throw new ImageReferenceError(input, 'more than one "@"');
  let nameAndTag = at >= 0 ? input.slice(0, at) : input;
  let digest: string | undefined;
  if (at >= 0) {
    const raw = input.slice(at + 1);
    try {
      digest = parseDigest(raw).value;
    } catch (err) {
      throw new ImageReferenceError(input, `the part after "@" is not a digest (${(err as Error).message.split(';')[0]})`);
    }
  }

  // A tag follows the last ":" that comes after the last "/" (a ":" before it is a port).
  let tag: string | undefined;
  const lastColon = nameAndTag.lastIndexOf(':');
  if (lastColon > nameAndTag.lastIndexOf('/')) {
    tag = nameAndTag.slice(lastColon + 1);
    nameAndTag = nameAndTag.slice(0, lastColon);
    if (!TAG.test(tag)) {
      throw new ImageReferenceError(
        input,
        `tag ${JSON.stringify(tag)} is not valid (letters, digits, "_", "." and "-", not starting with "." or "-", at most 128)`,
      );
    }
  }
  if (nameAndTag.length === 0) throw new ImageReferenceError(input, 'the repository name is empty');

  const { registry, repository } = splitRegistry(input, nameAndTag);
  if (repository !== repository.toLowerCase()) throw new ImageReferenceError(input, 'the repository name must be lowercase');
  for (const component of repository.split('/')) {
    if (!PATH_COMPONENT.test(component)) {
      throw new ImageReferenceError(
        input,
        component === ''
          ? 'the repository name has an empty path component ("//" or a trailing "/")'
          : `path component ${JSON.stringify(component)} is not valid (lowercase letters and digits, separated by ".", "_", "__" or "-")`,
      );
    }
  }
  const name = `${registry}/${repository}`;
  if (name.length > MAX_NAME_LENGTH)
    throw new ImageReferenceError(input, `the repository name is longer than ${MAX_NAME_LENGTH} characters`);

  const effectiveTag = tag ?? (digest === undefined ? 'latest' : undefined);
  const canonical = `${name}${effectiveTag !== undefined ? `:${effectiveTag}` : ''}${digest !== undefined ? `@${digest}` : ''}`;
  return {
    kind: 'registry',
    registry,
    repository,
    ...(effectiveTag !== undefined ? { tag: effectiveTag } : {}),
    ...(digest !== undefined ? { digest } : {}),
    canonical,
  };
}

/** The host[:port] the distribution API of this registry answers on. */
export function registryApiHost(registry: string): string {
  return registry === DOCKER_HUB ? DOCKER_HUB_API_HOST : registry;
}

/** `registry/repository`, the reference without tag or digest. */
export function repositoryName(ref: RegistryReference): string {
  return `${ref.registry}/${ref.repository}`;
}

/** Docker's rule: the first component is a registry only if it has a "." or ":", or is "localhost", or has uppercase. */
function splitRegistry(input: string, name: string): { registry: string; repository: string } {
  const slash = name.indexOf('/');
  let registry = DOCKER_HUB;
  let repository = name;
  if (slash >= 0) {
    const first = name.slice(0, slash);
    if (/[.:]/.test(first) || first === 'localhost' || first !== first.toLowerCase()) {
      registry = first;
      repository = name.slice(slash + 1);
      if (!DOMAIN.test(registry)) throw new ImageReferenceError(input, `registry ${JSON.stringify(registry)} is not a host[:port]`);
      const port = /:([0-9]+)$/.exec(registry);
      if (port && (Number(port[1]) < 1 || Number(port[1]) > 65535)) throw new ImageReferenceError(input, `port ${port[1]} is out of range`);
    }
  }
  if (registry === 'index.docker.io') registry = DOCKER_HUB;
  if (registry === DOCKER_HUB && !repository.includes('/')) repository = `library/${repository}`;
  if (repository.length === 0) throw new ImageReferenceError(input, 'the repository name is empty');
  return { registry, repository };
}

function parseArchive(input: string, kind: ArchiveReference['kind']): ArchiveReference {
  const rest = input.slice(kind.length + 1);
  if (input.length > MAX_PATH_LENGTH + kind.length + 256) throw new ImageReferenceError(input, 'longer than a path can be');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(rest)) throw new ImageReferenceError(input, 'the archive path contains control characters');
  const colon = rest.indexOf(':');
  const path = colon >= 0 ? rest.slice(0, colon) : rest;
  const inner = colon >= 0 ? rest.slice(colon + 1) : undefined;
  if (!path.startsWith('/')) throw new ImageReferenceError(input, `${kind} takes an absolute path, e.g. ${kind}:/srv/images/plugin.tar`);
  if (path.split('/').includes('..')) throw new ImageReferenceError(input, 'the archive path must not contain ".." segments');
  if (path.length > MAX_PATH_LENGTH) throw new ImageReferenceError(input, `the archive path is longer than ${MAX_PATH_LENGTH} characters`);
  if (inner !== undefined && inner.length === 0)
    throw new ImageReferenceError(input, 'nothing after the ":" that follows the archive path');
  return { kind, path, ...(inner !== undefined ? { inner } : {}), canonical: input };
}
