// `docker-archive:PATH[:NAME:TAG|:@INDEX]` as skopeo's transport means it
// (containers-transports(5)): the output of `docker save` — manifest.json
// (a list of { Config, RepoTags, Layers }), the config json and the layer
// tars at the paths Layers gives (uncompressed; gzip in newer Docker).
// NAME:TAG picks the entry whose RepoTags has it (names compared as Docker
// normalises them); without one the archive must hold exactly one image.
// A docker-archive names layers by path, not digest: the first read hashed
// each, and here each layer's uncompressed digest must be the config's
// rootfs.diff_ids entry. The image then gets an OCI manifest made for it
// (config and layers as stored, in a fixed JSON form, so one archive always
// gives one manifest digest), and the store keeps it as it keeps a pull.
import { parseRegistryReference, ImageReferenceError } from '@csiplug/core';
import { digestOf } from '../digest';
import { parseImageConfig, type LayerDescriptor } from '../manifest';
import { MediaType } from '../media-types';
import type { ArchiveCatalog } from './archive-catalog';
import { ImageArchiveError, ImageArchiveReferenceError } from './archive-errors';
import { parseArchiveDocument, type ArchiveBlob, type ArchiveImage } from './archive-image';

interface SavedImage {
  readonly Config: string;
  readonly RepoTags: readonly string[];
  readonly Layers: readonly string[];
}

/** The image `reference` names in the docker-archive the catalog read (gunzipped digests asked for). */
export function readDockerArchive(catalog: ArchiveCatalog, reference: string | undefined): ArchiveImage {
  const archive = catalog.archive;
  if (!catalog.has('manifest.json'))
    throw new ImageArchiveError(
      archive,
      'manifest.json',
      'missing: this is not a docker save file (for an OCI layout, skopeo copy … oci-archive:, use image = "oci-archive:…")',
    );
  const saved = parseArchiveDocument(archive, 'manifest.json', () => savedImages(catalog.document('manifest.json', 'the archive')));
  if (saved === undefined)
    throw new ImageArchiveError(archive, 'manifest.json', 'is not a list of { Config, RepoTags, Layers } as docker save writes');
  const item = chooseImage(archive, saved, reference);

  const configMember = catalog.resolve(item.Config, "manifest.json's Config");
  const configBytes = catalog.document(configMember.name, 'the image config');
  const configDigest = configMember.digest!;
  const namedHex = /(?:^|\/)([0-9a-f]{64})(?:\.json)?$/.exec(configMember.name)?.[1];
  if (namedHex !== undefined && `sha256:${namedHex}` !== configDigest)
    throw new ImageArchiveError(
      archive,
      configMember.name,
      `the config is named for sha256:${namedHex} but hashes to ${configDigest}: it was altered`,
    );
  const config = parseArchiveDocument(archive, configMember.name, () => parseImageConfig(configBytes, archive, 'the image config'));
  if (config.diffIds.length !== item.Layers.length)
    throw new ImageArchiveError(
      archive,
      'manifest.json',
      `lists ${item.Layers.length} layers, the config's rootfs.diff_ids ${config.diffIds.length}`,
    );

  const layerBlobs: ArchiveBlob[] = [];
  const layers: LayerDescriptor[] = [];
  item.Layers.forEach((layerPath, i) => {
    const m = catalog.resolve(layerPath, `manifest.json's layer ${i}`);
    const diffId = config.diffIds[i]!;
    let uncompressed: string | undefined;
    if (m.compression === 'none') uncompressed = m.digest;
    else if (m.compression === 'gzip') {
      if (m.gunzipError !== undefined)
        throw new ImageArchiveError(archive, m.name, `layer ${i} is not a valid gzip stream (${m.gunzipError})`);
      uncompressed = m.gunzippedDigest;
    } else
      throw new ImageArchiveError(
        archive,
        m.name,
        `layer ${i} is ${m.compression}-compressed; a docker-archive layer is a tar or a gzipped tar`,
      );
    if (uncompressed !== diffId)
      throw new ImageArchiveError(
        archive,
        m.name,
        `layer ${i} hashes to ${uncompressed} uncompressed, but the config's rootfs.diff_ids[${i}] says ${diffId}: the layer or the config was altered`,
      );
    layerBlobs.push({ digest: m.digest!, size: m.size, member: m.name });
    layers.push({
      mediaType: m.compression === 'gzip' ? MediaType.OciLayerGzip : MediaType.OciLayer,
      digest: m.digest!,
      size: m.size,
      compression: m.compression,
    });
  });

  // Keys in a fixed order: the same archive always makes the same manifest, so a second load finds it stored.
  const manifestBytes = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MediaType.OciManifest,
      config: { mediaType: MediaType.OciConfig, digest: configDigest, size: configBytes.length },
      layers: layers.map((l) => ({ mediaType: l.mediaType, digest: l.digest, size: l.size })),
    }),
  );
  const manifestDigest = digestOf(manifestBytes);
  return {
    documents: [
      { digest: manifestDigest, bytes: manifestBytes },
      { digest: configDigest, bytes: configBytes },
    ],
    layerBlobs,
    repoDigest: manifestDigest,
    manifestDigest,
    manifestMediaType: MediaType.OciManifest,
    configDigest,
    config,
    layers,
  };
}

function savedImages(bytes: Buffer): SavedImage[] | undefined {
  const doc = JSON.parse(bytes.toString('utf8')) as unknown;
  if (!Array.isArray(doc)) return undefined;
  const out: SavedImage[] = [];
  for (const x of doc as unknown[]) {
    if (x === null || typeof x !== 'object') return undefined;
    const { Config, RepoTags, Layers } = x as Record<string, unknown>;
    if (typeof Config !== 'string' || !Array.isArray(Layers) || !Layers.every((l) => typeof l === 'string')) return undefined;
    if (RepoTags !== undefined && RepoTags !== null && (!Array.isArray(RepoTags) || !RepoTags.every((t) => typeof t === 'string')))
      return undefined;
    out.push({ Config, RepoTags: (RepoTags as string[] | null | undefined) ?? [], Layers: Layers as string[] });
  }
  return out;
}

/** skopeo's choice: no reference, the only image; `@N`, the Nth; `name:tag`, the one whose RepoTags has it. */
function chooseImage(archive: string, saved: readonly SavedImage[], reference: string | undefined): SavedImage {
  const tags = saved.flatMap((s) => s.RepoTags);
  const has = tags.length ? `it holds ${tags.map((t) => JSON.stringify(t)).join(', ')}` : 'its images have no RepoTags';
  if (reference === undefined) {
    if (saved.length !== 1)
      throw new ImageArchiveReferenceError(
        archive,
        `holds ${saved.length} images and the reference names none (${has}); name one after the path, e.g. docker-archive:${archive}:${tags[0] ?? '@0'}`,
      );
    return saved[0]!;
  }
  if (/^@[0-9]+$/.test(reference)) {
    const item = saved[Number(reference.slice(1))];
    if (!item) throw new ImageArchiveReferenceError(archive, `holds ${saved.length} images; there is no ${reference}`);
    return item;
  }
  let wanted: string;
  try {
    const parsed = parseRegistryReference(reference);
    if (parsed.digest !== undefined)
      throw new ImageArchiveReferenceError(
        archive,
        `a docker-archive image is named by name:tag or @index, not by digest (got ${reference})`,
      );
    wanted = parsed.canonical;
  } catch (err) {
    if (err instanceof ImageReferenceError)
      throw new ImageArchiveReferenceError(archive, `${JSON.stringify(reference)} is not a name:tag (${err.reason})`);
    throw err;
  }
  const matches = saved.filter((s) =>
    s.RepoTags.some((t) => {
      try {
        return parseRegistryReference(t).canonical === wanted;
      } catch {
        return false;
      }
    }),
  );
  if (matches.length === 0) throw new ImageArchiveReferenceError(archive, `holds no image tagged ${JSON.stringify(reference)}; ${has}`);
  if (matches.length > 1)
    throw new ImageArchiveReferenceError(archive, `holds ${matches.length} images tagged ${JSON.stringify(reference)}`);
  return matches[0]!;
}
