// A runnable test image without a base image: a layer holding some of the
// host's programs and the shared libraries `ldd` lists for them (the dynamic
// loader included), as plain files at the paths the host has them. Tests run
// such an image on runc; there is no busybox to pull.
import { execFile } from 'node:child_process';
import { readFile, realpath } from 'node:fs/promises';
import type { TestImageLayer } from './image-builder';

function ldd(binary: string): Promise<string> {
  return new Promise((resolve, reject) =>
    execFile('/usr/bin/ldd', [binary], (err, stdout, stderr) =>
      // A static program makes ldd exit 1 with "not a dynamic executable": it needs no libraries.
      err && !/not a dynamic executable/.test(`${stdout}${stderr}`)
        ? reject(new Error(`ldd ${binary} failed: ${stderr || err.message}`))
        : resolve(stdout),
    ),
  );
}

/** The absolute paths of the libraries `binary` loads, its loader included. */
async function librariesOf(binary: string): Promise<string[]> {
  const out: string[] = [];
  for (const line of (await ldd(binary)).split('\n')) {
    const arrow = /=>\s+(\/\S+)/.exec(line);
    const bare = /^\s*(\/\S+)\s+\(/.exec(line);
    const lib = arrow?.[1] ?? bare?.[1];
    if (lib) out.push(lib);
  }
  return out;
}

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
    for (const p of [binary, ...(await librariesOf(binary))]) {
      const inImage = p.replace(/^\/+/, '');
      if (files[inImage]) continue;
      files[inImage] = await readFile(await realpath(p));
      modes[inImage] = 0o755;
    }
  }
  return { files, modes };
}
