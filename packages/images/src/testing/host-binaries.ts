// A runnable test image without a base image: a layer holding some of the
// host's programs and the shared libraries `ldd` lists for them (the dynamic
// loader included), as plain files at the paths the host has them. Tests run
// such an image on runc; there is no busybox to pull. The libraries come
// from host-files.ts's ldd reader, which the hostpath plugin's image uses too.
import { readFile, realpath } from 'node:fs/promises';
import { sharedLibraries } from './host-files';
import type { TestImageLayer } from './image-builder';

/**
 * A layer with each of `binaries` (absolute host paths, e.g. /bin/sh) at its
 * own path, mode 0755, and every library they load at the path ldd names
 * (the file's content, links resolved on the host).
 */
export async function hostBinariesLayer(binaries: readonly string[]): Promise<TestImageLayer> {
  const files: Record<string, Uint8Array> = {};
  const modes: Record<string, number> = {};
  for (const binary of binaries) {
    if (!binary.startsWith('/')) throw new Error(`hostBinariesLayer: ${binary} is not an absolute path`);
    for (const p of [binary, ...(await sharedLibraries(binary))]) {
      const inImage = p.replace(/^\/+/, '');
      if (files[inImage]) continue;
      files[inImage] = await readFile(await realpath(p));
      modes[inImage] = 0o755;
    }
  }
  return { files, modes };
}
