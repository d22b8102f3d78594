// `oci-archive:PATH[:REFERENCE]` as skopeo's transport means it
// (containers-transports(5)): a tar of an OCI image layout (oci-layout,
// index.json, blobs/<algorithm>/<hex>). REFERENCE picks the index.json entry
// whose org.opencontainers.image.ref.name annotation it is; without one the
// archive must hold exactly one entry (else an error naming the refs it
// has). An entry that is an image index goes to this node's platform, as a
// pull does. Every blob is checked against its descriptor's size and digest.
import { parseImageConfig, parseManifestOrIndex, type Descriptor, type Platform } from '../manifest';
import { selectPlatformManifest } from '../platform';
import type { ArchiveCatalog } from './archive-catalog';
import { ImageArchiveError, ImageArchiveReferenceError } from './archive-errors';
import { blobMember, parseArchiveDocument, type ArchiveImage } from './archive-image';

export const REF_NAME_ANNOTATION = 'org.opencontainers.image.ref.name';

/** The image `reference` names in the OCI archive the catalog read (`canonical`: for errors and the platform choice). */
export function readOciArchive(
  catalog: ArchiveCatalog,
  reference: string | undefined,
  platform: Platform,
  canonical: string,
): ArchiveImage {
  const archive = catalog.archive;
  if (!catalog.has('oci-layout'))
    throw new ImageArchiveError(
      archive,
      'oci-layout',
      'missing: this is not an OCI image layout (for a file written by docker save or skopeo copy … docker-archive:, use image = "docker-archive:…")',
    );
  const layout = parseArchiveDocument(
    archive,
    'oci-layout',
    () => JSON.parse(catalog.document('oci-layout', 'the layout').toString('utf8')) as unknown,
  );
  if (layout === null || typeof layout !== 'object' || typeof (layout as { imageLayoutVersion?: unknown }).imageLayoutVersion !== 'string')
    throw new ImageArchiveError(archive, 'oci-layout', 'has no imageLayoutVersion: not an OCI image layout');
  const indexParsed = parseArchiveDocument(archive, 'index.json', () =>
    parseManifestOrIndex(catalog.document('index.json', 'the OCI layout'), undefined, archive, 'index.json'),
  );
  if (indexParsed.kind !== 'index') throw new ImageArchiveError(archive, 'index.json', 'is not an image index');
  const entries = indexParsed.index.manifests;
  const refs = entries.map((m) => m.annotations?.[REF_NAME_ANNOTATION]).filter((r): r is string => r !== undefined);
  const has = refs.length ? `it holds ${refs.map((r) => JSON.stringify(r)).join(', ')}` : 'its entries have no ref names';
  let top: Descriptor;
  if (reference === undefined) {
    if (entries.length !== 1)
      throw new ImageArchiveReferenceError(
        archive,
        `holds ${entries.length} images and the reference names none (${has}); name one after the path, e.g. oci-archive:${archive}:${refs[0] ?? 'latest'}`,
      );
    top = entries[0]!;
  } else {
    const matches = entries.filter((m) => m.annotations?.[REF_NAME_ANNOTATION] === reference);
    if (matches.length === 0)
      throw new ImageArchiveReferenceError(archive, `holds no image named ${JSON.stringify(reference)} (${REF_NAME_ANNOTATION}); ${has}`);
    if (matches.length > 1)
      throw new ImageArchiveReferenceError(
        archive,
        `holds ${matches.length} images named ${JSON.stringify(reference)}; which one is meant is unclear`,
      );
    top = matches[0]!;
  }

  const documents: { digest: string; bytes: Buffer }[] = [];
  let desc = top;
  let member = blobMember(catalog, desc, `index.json's entry ${desc.digest}`);
  let bytes = catalog.document(member.name, `manifest ${desc.digest}`);
  let parsed = parseArchiveDocument(archive, member.name, () =>
    parseManifestOrIndex(bytes, desc.mediaType, archive, `manifest ${desc.digest}`),
  );
  if (parsed.kind === 'index') {
    documents.push({ digest: desc.digest, bytes });
    const chosen = selectPlatformManifest(parsed.index.manifests, platform, canonical);
    member = blobMember(catalog, chosen, `index ${desc.digest}'s entry for this platform`);
    desc = chosen;
    bytes = catalog.document(member.name, `manifest ${chosen.digest}`);
    parsed = parseArchiveDocument(archive, member.name, () =>
      parseManifestOrIndex(bytes, chosen.mediaType, archive, `manifest ${chosen.digest}`),
    );
    if (parsed.kind !== 'manifest') throw new ImageArchiveError(archive, member.name, `index entry ${chosen.digest} is an index again`);
  }
  const manifest = parsed.manifest;
  documents.push({ digest: desc.digest, bytes });
  const configMember = blobMember(catalog, manifest.config, `manifest ${desc.digest}'s config`);
  const configBytes = catalog.document(configMember.name, `image config ${manifest.config.digest}`);
  const config = parseArchiveDocument(archive, configMember.name, () =>
    parseImageConfig(configBytes, archive, `image config ${manifest.config.digest}`),
  );
  documents.push({ digest: manifest.config.digest, bytes: configBytes });
  if (config.diffIds.length !== manifest.layers.length)
    throw new ImageArchiveError(
      archive,
      configMember.name,
      `the config lists ${config.diffIds.length} diff_ids for ${manifest.layers.length} layers`,
    );
  const layerBlobs = manifest.layers.map((l, i) => {
    const m = blobMember(catalog, l, `manifest ${desc.digest}'s layer ${i}`);
    return { digest: l.digest, size: l.size, member: m.name };
  });
  return {
    documents,
    layerBlobs,
    repoDigest: top.digest,
    manifestDigest: desc.digest,
    manifestMediaType: manifest.mediaType,
    configDigest: manifest.config.digest,
    config,
    layers: manifest.layers,
  };
}
