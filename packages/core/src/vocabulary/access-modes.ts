// CSI access modes as jobspecs and volume specs spell them (Nomad's names),
// and the two groups of them that decide who may claim a volume: read-only
// modes and single-writer modes. The volume catalog and the cluster
// scheduler judge claims by them; the jobspec reader checks and orders
// replacements by them.
//
// single-node-single-writer and single-node-multi-writer are CSI's
// SINGLE_NODE_SINGLE_WRITER / SINGLE_NODE_MULTI_WRITER (spec v1.9.0, alpha;
// a plugin offers them with the SINGLE_NODE_MULTI_WRITER node capability).
// Nomad spells them so for its host volumes (nomad/structs/host_volumes.go;
// its CSIVolumeAccessMode list stops at the first five) and means: one
// writer alloc on the node, or any number of writer allocs on that one node.

export const ACCESS_MODES = [
  'single-node-writer',
  'single-node-reader-only',
  'multi-node-reader-only',
  'multi-node-single-writer',
  'multi-node-multi-writer',
  'single-node-single-writer',
  'single-node-multi-writer',
] as const;
export type AccessMode = (typeof ACCESS_MODES)[number];

/** Modes under which a volume can only be used read-only. */
export const READER_ONLY_ACCESS_MODES: readonly AccessMode[] = ['single-node-reader-only', 'multi-node-reader-only'];

/** Access modes that allow one writer at a time. */
export const SINGLE_WRITER_ACCESS_MODES: readonly string[] = Object.freeze([
  'single-node-writer',
  'single-node-single-writer',
  'multi-node-single-writer',
]);
