// The JSON documents of an image, parsed with their shape checked: an image
// index (or Docker manifest list), an image manifest, and the image config
// (what the runtime honours: Entrypoint, Cmd, Env, WorkingDir, User, Labels,
// and rootfs.diff_ids). Garbage from a registry becomes a clear error, never
// a half-read object.
import { parseDigest } from './digest';
import { RegistryProtocolError } from './errors';
import { checkConfigMediaType, layerCompression, manifestKind, type LayerCompression } from './media-types';

export interface Platform {
  readonly os: string;
  readonly architecture: string;
  readonly variant?: string;
}

export interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly platform?: Platform;
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface LayerDescriptor extends Descriptor {
  readonly compression: LayerCompression;
}

export interface ImageIndexDocument {
  readonly mediaType: string;
  readonly manifests: readonly Descriptor[];
}

export interface ImageManifestDocument {
  readonly mediaType: string;
  readonly config: Descriptor;
  readonly layers: readonly LayerDescriptor[];
}

/** What the runtime honours from an image's config, as Docker does. */
export interface ImageConfig {
  readonly entrypoint?: readonly string[];
  readonly cmd?: readonly string[];
  readonly env: readonly string[];
  readonly workingDir?: string;
  readonly user?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly os?: string;
  readonly architecture?: string;
  /** The uncompressed layers' digests, in order (rootfs.diff_ids). */
  readonly diffIds: readonly string[];
}

type Json = Record<string, unknown>;

function parseJson(bytes: Uint8Array, source: string, what: string): Json {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (err) {
    throw new RegistryProtocolError(source, `${what} is not JSON (${(err as Error).message})`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new RegistryProtocolError(source, `${what} is not a JSON object`);
  return value as Json;
}

function descriptor(value: unknown, source: string, what: string): Descriptor {
  if (value === null || typeof value !== 'object') throw new RegistryProtocolError(source, `${what} is not a descriptor object`);
  const d = value as Json;
  if (typeof d.mediaType !== 'string') throw new RegistryProtocolError(source, `${what} has no mediaType`);
  if (typeof d.digest !== 'string') throw new RegistryProtocolError(source, `${what} has no digest`);
  try {
    parseDigest(d.digest);
  } catch (err) {
    throw new RegistryProtocolError(source, `${what}: ${(err as Error).message}`);
  }
  if (typeof d.size !== 'number' || !Number.isSafeInteger(d.size) || d.size < 0)
    throw new RegistryProtocolError(source, `${what} has no valid size`);
  const out: { -readonly [K in keyof Descriptor]: Descriptor[K] } = { mediaType: d.mediaType, digest: d.digest, size: d.size };
  if (d.platform !== undefined && d.platform !== null && typeof d.platform === 'object') {
    const p = d.platform as Json;
    if (typeof p.os === 'string' && typeof p.architecture === 'string') {
      out.platform = { os: p.os, architecture: p.architecture, ...(typeof p.variant === 'string' ? { variant: p.variant } : {}) };
    }
  }
  if (d.annotations !== null && typeof d.annotations === 'object') out.annotations = stringRecord(d.annotations);
  return out;
}

function stringRecord(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (value === null || typeof value !== 'object') return out;
  for (const [k, v] of Object.entries(value as Json)) if (typeof v === 'string') out[k] = v;
  return out;
}

function stringArray(value: unknown, source: string, what: string): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string'))
    throw new RegistryProtocolError(source, `${what} is not a list of strings`);
  return value as string[];
}

/**
 * Parses a manifest-or-index body. The media type comes from the document
 * when it has one, else from the response's Content-Type.
 */
export function parseManifestOrIndex(
  bytes: Uint8Array,
  contentType: string | undefined,
  source: string,
  what: string,
): { kind: 'index'; index: ImageIndexDocument } | { kind: 'manifest'; manifest: ImageManifestDocument } {
  const doc = parseJson(bytes, source, what);
  if (doc.schemaVersion === 1) manifestKind('application/vnd.docker.distribution.manifest.v1+json', what);
  const mediaType = typeof doc.mediaType === 'string' ? doc.mediaType : inferMediaType(doc, contentType);
  const kind = manifestKind(mediaType, what);
  if (doc.schemaVersion !== 2)
    throw new RegistryProtocolError(source, `${what} has schemaVersion ${JSON.stringify(doc.schemaVersion)}, expected 2`);
  if (kind === 'index') {
    if (!Array.isArray(doc.manifests)) throw new RegistryProtocolError(source, `${what} (an index) has no manifests list`);
    return {
      kind,
      index: { mediaType: mediaType!, manifests: doc.manifests.map((m, i) => descriptor(m, source, `${what} manifests[${i}]`)) },
    };
  }
  const config = descriptor(doc.config, source, `${what} config`);
  checkConfigMediaType(config.mediaType, what);
  if (!Array.isArray(doc.layers)) throw new RegistryProtocolError(source, `${what} has no layers list`);
  const layers = doc.layers.map((l, i) => {
    const d = descriptor(l, source, `${what} layers[${i}]`);
    return { ...d, compression: layerCompression(d.mediaType, `${what} layer ${d.digest}`) };
  });
  return { kind, manifest: { mediaType: mediaType!, config, layers } };
}

function inferMediaType(doc: Json, contentType: string | undefined): string | undefined {
  const fromHeader = contentType?.split(';')[0]?.trim();
  if (fromHeader && fromHeader !== 'application/json') return fromHeader;
  // An OCI document may omit mediaType; its shape says what it is.
  if (Array.isArray(doc.manifests)) return 'application/vnd.oci.image.index.v1+json';
  if (doc.config !== undefined && Array.isArray(doc.layers)) return 'application/vnd.oci.image.manifest.v1+json';
  return fromHeader;
}

/** Parses an image config blob. */
export function parseImageConfig(bytes: Uint8Array, source: string, what: string): ImageConfig {
  const doc = parseJson(bytes, source, what);
  const c = doc.config !== null && typeof doc.config === 'object' ? (doc.config as Json) : {};
  const rootfs = doc.rootfs !== null && typeof doc.rootfs === 'object' ? (doc.rootfs as Json) : undefined;
  if (!rootfs || rootfs.type !== 'layers') throw new RegistryProtocolError(source, `${what} has no rootfs of type "layers"`);
  const diffIds = stringArray(rootfs.diff_ids, source, `${what} rootfs.diff_ids`) ?? [];
  for (const id of diffIds) {
    try {
      parseDigest(id);
    } catch (err) {
      throw new RegistryProtocolError(source, `${what} rootfs.diff_ids: ${(err as Error).message}`);
    }
  }
  const entrypoint = stringArray(c.Entrypoint, source, `${what} Entrypoint`);
  const cmd = stringArray(c.Cmd, source, `${what} Cmd`);
  const optionalString = (v: unknown, field: string) => {
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') throw new RegistryProtocolError(source, `${what} ${field} is not a string`);
    return v;
  };
  const workingDir = optionalString(c.WorkingDir, 'WorkingDir');
  const user = optionalString(c.User, 'User');
  const os = optionalString(doc.os, 'os');
  const architecture = optionalString(doc.architecture, 'architecture');
  return {
    ...(entrypoint ? { entrypoint } : {}),
    ...(cmd ? { cmd } : {}),
    env: stringArray(c.Env, source, `${what} Env`) ?? [],
    ...(workingDir !== undefined ? { workingDir } : {}),
    ...(user !== undefined ? { user } : {}),
    labels: stringRecord(c.Labels),
    ...(os !== undefined ? { os } : {}),
    ...(architecture !== undefined ? { architecture } : {}),
    diffIds,
  };
}
