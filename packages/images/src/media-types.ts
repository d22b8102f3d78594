// The media types a pull meets: OCI image index and manifest, Docker's
// manifest list and schema-2 manifest, image configs, and layers (gzip,
// zstd, uncompressed). Anything else is refused here, by name, with what to
// do: schema-1 manifests, foreign/non-distributable layers, unknown types.
import { UnsupportedImageError } from './errors';

export const MediaType = {
  OciIndex: 'application/vnd.oci.image.index.v1+json',
  OciManifest: 'application/vnd.oci.image.manifest.v1+json',
  OciConfig: 'application/vnd.oci.image.config.v1+json',
  OciLayer: 'application/vnd.oci.image.layer.v1.tar',
  OciLayerGzip: 'application/vnd.oci.image.layer.v1.tar+gzip',
  OciLayerZstd: 'application/vnd.oci.image.layer.v1.tar+zstd',
  OciLayerNonDistributable: 'application/vnd.oci.image.layer.nondistributable.v1.tar',
  OciLayerNonDistributableGzip: 'application/vnd.oci.image.layer.nondistributable.v1.tar+gzip',
  OciLayerNonDistributableZstd: 'application/vnd.oci.image.layer.nondistributable.v1.tar+zstd',
  DockerManifestList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  DockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  DockerManifestSchema1: 'application/vnd.docker.distribution.manifest.v1+json',
  DockerManifestSchema1Signed: 'application/vnd.docker.distribution.manifest.v1+prettyjws',
  DockerConfig: 'application/vnd.docker.container.image.v1+json',
  DockerLayerGzip: 'application/vnd.docker.image.rootfs.diff.tar.gzip',
  DockerLayerForeignGzip: 'application/vnd.docker.image.rootfs.foreign.diff.tar.gzip',
} as const;

/** What the client sends in Accept for a manifest: every kind it can use, indexes first. */
export const MANIFEST_ACCEPT = [MediaType.OciIndex, MediaType.DockerManifestList, MediaType.OciManifest, MediaType.DockerManifest].join(
  ', ',
);

export type ManifestKind = 'index' | 'manifest';
export type LayerCompression = 'gzip' | 'zstd' | 'none';

const INDEX_TYPES = new Set<string>([MediaType.OciIndex, MediaType.DockerManifestList]);
const MANIFEST_TYPES = new Set<string>([MediaType.OciManifest, MediaType.DockerManifest]);
const CONFIG_TYPES = new Set<string>([MediaType.OciConfig, MediaType.DockerConfig]);
const LAYER_TYPES = new Map<string, LayerCompression>([
  [MediaType.OciLayer, 'none'],
  [MediaType.OciLayerGzip, 'gzip'],
  [MediaType.OciLayerZstd, 'zstd'],
  [MediaType.DockerLayerGzip, 'gzip'],
]);
const FOREIGN_LAYER_TYPES = new Set<string>([
  MediaType.OciLayerNonDistributable,
  MediaType.OciLayerNonDistributableGzip,
  MediaType.OciLayerNonDistributableZstd,
  MediaType.DockerLayerForeignGzip,
]);

/** Index or manifest; throws UnsupportedImageError for schema 1 and anything unknown. */
export function manifestKind(mediaType: string | undefined, what: string): ManifestKind {
  if (mediaType !== undefined && INDEX_TYPES.has(mediaType)) return 'index';
  if (mediaType !== undefined && MANIFEST_TYPES.has(mediaType)) return 'manifest';
  if (mediaType === MediaType.DockerManifestSchema1 || mediaType === MediaType.DockerManifestSchema1Signed) {
    throw new UnsupportedImageError(
      what,
      'it is a Docker schema-1 manifest, deprecated since 2017 and not supported; push the image again with a current Docker, skopeo or buildah (they write schema 2 or OCI)',
    );
  }
  throw new UnsupportedImageError(
    what,
    `manifest media type ${JSON.stringify(mediaType ?? '(none)')} is not one csiplug pulls (OCI image index/manifest, Docker manifest list/schema 2)`,
  );
}

/** Checks an image config's media type. */
export function checkConfigMediaType(mediaType: string, what: string): void {
  if (!CONFIG_TYPES.has(mediaType)) {
    throw new UnsupportedImageError(
      what,
      `config media type ${JSON.stringify(mediaType)} is not an image config (this looks like an artifact, not a container image)`,
    );
  }
}

/** The compression of a layer; foreign and unknown layer types are refused. */
export function layerCompression(mediaType: string, what: string): LayerCompression {
  const compression = LAYER_TYPES.get(mediaType);
  if (compression !== undefined) return compression;
  if (FOREIGN_LAYER_TYPES.has(mediaType)) {
    throw new UnsupportedImageError(
      what,
      `it is a foreign (non-distributable) layer (${mediaType}), which lives outside the registry (Windows base layers); csiplug runs Linux images whose layers all come from the registry`,
    );
  }
  throw new UnsupportedImageError(what, `layer media type ${JSON.stringify(mediaType)} is not supported (tar, tar+gzip, tar+zstd)`);
}
