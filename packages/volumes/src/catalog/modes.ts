// CSI access and attachment modes as jobspecs and volume specs spell them
// (Nomad's names). They live here, with the VolumeSpec that uses them; the
// agent's spec readers re-export them.

export const ACCESS_MODES = [
  'single-node-writer',
  'single-node-reader-only',
  'multi-node-reader-only',
  'multi-node-single-writer',
  'multi-node-multi-writer',
] as const;
export type AccessMode = (typeof ACCESS_MODES)[number];

/** Modes under which a volume can only be used read-only. */
export const READER_ONLY_ACCESS_MODES: readonly AccessMode[] = ['single-node-reader-only', 'multi-node-reader-only'];

export const ATTACHMENT_MODES = ['file-system', 'block-device'] as const;
export type AttachmentMode = (typeof ATTACHMENT_MODES)[number];
