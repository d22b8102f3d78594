// The CSI name a `volume create` sends: CreateVolume's `name`, which CSI makes
// the idempotency key (the same name twice is the same storage). It is a pure
// function of the volume id — never of the volume's display `name`, which two
// volumes may share — so two volumes never get one piece of storage, a retried
// create of the same id gets its own volume back, and every node of a cluster
// derives the same name (as Kubernetes's external-provisioner sends
// `pvc-<uid>` for a PV). Volumes created before this rule keep the external
// ids they were recorded with; only new creates use it.
//
// The form is stable: changing it would make a retried create make a second
// volume. `csiplug-<id>` when the id is a DNS label of lowercase letters,
// digits and dashes that fits in 63 characters with the prefix (what the
// pickiest plugins, cloud disks among them, accept); any other id (capitals,
// dots, underscores, long) becomes `csiplug--<slug>-<hash>`: up to 20
// characters of it in that alphabet, then 32 hex digits of its SHA-256. The
// doubled dash cannot follow the prefix in the first form (a label starts
// with a letter or digit), so the two forms never meet.
import { createHash } from 'node:crypto';

export const CSI_VOLUME_NAME_PREFIX = 'csiplug-';

/** The longest name sent: a DNS label's 63 characters, well inside CSI's 128 bytes. */
const MAX_NAME = 63;
const LABEL = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;
const SLUG_LENGTH = 20;
const HASH_HEX = 32;

/** CreateVolume's `name` for the catalog's volume `volumeId`. */
export function csiVolumeName(volumeId: string): string {
  const plain = CSI_VOLUME_NAME_PREFIX + volumeId;
  if (LABEL.test(volumeId) && plain.length <= MAX_NAME) return plain;
  const slug = volumeId
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, SLUG_LENGTH)
    .replace(/^-+|-+$/g, '');
  const hash = createHash('sha256').update(volumeId, 'utf8').digest('hex').slice(0, HASH_HEX);
  return `${CSI_VOLUME_NAME_PREFIX}-${slug ? `${slug}-` : ''}${hash}`;
}
