// What is mounted for an alloc's volume below its publish dirs, as the
// mount table says: a claim is never released, nor a volume detached, from
// under a mount no record explains.
import { mountsUnder } from '@csiplug/csimanager';
import * as fs from 'fs';
import * as path from 'path';

/** What is mounted below the alloc's publish dirs of the volume (per-alloc/<alloc>/<volume>), whatever the plugin's type dir. */
export function mountsOfAlloc(dataDir: string, pluginId: string, allocId: string, volumeId: string): string[] {
  let root = dataDir;
  try {
    root = fs.realpathSync(root);
  } catch {
    // The mount table lists real paths; an unresolvable data dir has nothing mounted under it.
  }
  return ['monolith', 'node', 'controller'].flatMap((type) =>
    mountsUnder(path.join(root, 'csi', type, pluginId, 'per-alloc', allocId, volumeId)),
  );
}
