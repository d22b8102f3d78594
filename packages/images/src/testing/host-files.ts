// Host files put into an image's staging directory at the paths they have
// on the host: a program, the shared libraries `ldd` lists for it and the
// dynamic loader, for images built without a base image (the hostpath
// plugin's, `npm run image:hostpath`, and tests'). A path whose parts are
// symlinks on the host (Debian's merged /usr: /lib -> usr/lib, /lib64 ->
// usr/lib64; a library's soname link -> the versioned file) keeps those
// symlinks in the image and gets their targets too, so every path the
// loader or a caller uses works there as it does on the host.
import { execFile } from 'node:child_process';
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { ImageError } from '../errors';

const run = promisify(execFile);

/** A host file that cannot go in the image: says which and what to do. */
export class HostFilesError extends ImageError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('EIMAGE_HOST_FILES', message, options);
  }
}

/** How many symlinks one path may cross before it is refused (the kernel's ELOOP bound). */
const MAX_SYMLINKS = 40;

/**
 * The absolute paths of the shared libraries `ldd` lists for `program`
 * (and the dynamic loader), without the vDSO, which the kernel maps. A
 * library ldd cannot find fails the build: the image would not start.
 */
export async function sharedLibraries(program: string): Promise<string[]> {
  let stdout: string;
  try {
    ({ stdout } = await run('ldd', [program], { env: { ...process.env, LC_ALL: 'C' } }));
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    // ldd exits 1 with "not a dynamic executable" for a static program: nothing to copy.
    if (/not a dynamic executable|statically linked/.test(`${e.stdout ?? ''}${e.stderr ?? ''}`)) return [];
    throw new HostFilesError(`ldd ${program} failed: ${(e.stderr || e.message).trim()}; is ${program} a program of this machine?`, {
      cause: err,
    });
  }
  return parseLdd(program, stdout);
}

/** The library paths in `ldd` output (one per line: `name => /path (addr)`, `/path (addr)` or `/path => /path (addr)`). */
export function parseLdd(program: string, output: string): string[] {
  const libs: string[] = [];
  for (const raw of output.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('linux-vdso') || line.startsWith('linux-gate')) continue;
    if (/=> not found/.test(line))
      throw new HostFilesError(`ldd ${program}: ${line}; install the library on this machine before building the image`);
    if (line === 'statically linked') continue;
    const m = /^(\S+)(?:\s+=>\s+(\/\S+))?\s+\(0x[0-9a-f]+\)$/.exec(line);
    if (!m || (m[2] === undefined && !m[1]!.startsWith('/')))
      throw new HostFilesError(`ldd ${program}: cannot read the line ${JSON.stringify(line)}`);
    // The loader may be listed as `/lib64/ld-linux-x86-64.so.2 => /usr/lib64/…`: the program names the first path, so both go in.
    if (m[1]!.startsWith('/')) libs.push(m[1]!);
    if (m[2] !== undefined && m[2] !== m[1]) libs.push(m[2]);
  }
  return libs;
}

/**
 * Copies the host file `hostPath` into `stageRoot` at the same path,
 * symlinks on the way recreated as symlinks (their targets copied too).
 * Regular files keep their permission bits without setuid/setgid (the
 * plugin runs as root; the image needs no privilege bits). Directories made
 * on the way take the host directory's mode.
 */
export async function copyHostPath(hostPath: string, stageRoot: string, depth = 0): Promise<void> {
  if (!path.isAbsolute(hostPath)) throw new HostFilesError(`host path ${hostPath} must be absolute`);
  if (depth > MAX_SYMLINKS) throw new HostFilesError(`host path ${hostPath} crosses more than ${MAX_SYMLINKS} symlinks`);
  const parts = hostPath.split('/').filter(Boolean);
  let current = '/';
  for (const [i, part] of parts.entries()) {
    const host = path.join(current, part);
    const staged = path.join(stageRoot, host);
    const st = await fs.lstat(host).catch((err: NodeJS.ErrnoException) => {
      throw new HostFilesError(`${host} (for ${hostPath}) cannot be read: ${err.code ?? err.message}`, { cause: err });
    });
    const last = i === parts.length - 1;
    if (st.isSymbolicLink()) {
      const target = await fs.readlink(host);
      const existing = await fs.lstat(staged).catch(() => undefined);
      if (!existing) await fs.symlink(target, staged);
      else if (!existing.isSymbolicLink() || (await fs.readlink(staged)) !== target)
        throw new HostFilesError(`${host} is a symlink to ${target} on the host, but the image already has something else there`);
      // The rest of the path continues from where the link points.
      await copyHostPath(path.join(path.resolve(current, target), ...parts.slice(i + 1)), stageRoot, depth + 1);
      return;
    }
    if (st.isDirectory()) {
      await fs.mkdir(staged, { recursive: true });
      await fs.chmod(staged, st.mode & 0o1777);
      current = host;
      continue;
    }
    if (!last || !st.isFile()) throw new HostFilesError(`${host} (for ${hostPath}) is neither a directory, a symlink nor a regular file`);
    await fs.copyFile(host, staged);
    await fs.chmod(staged, st.mode & 0o777);
  }
}

/** Copies `program` and every library it needs (see sharedLibraries) into `stageRoot`; resolves with the paths copied. */
export async function copyProgram(program: string, stageRoot: string, skip: ReadonlySet<string> = new Set()): Promise<string[]> {
  const copied: string[] = [];
  for (const p of [program, ...(await sharedLibraries(program))]) {
    if (skip.has(p)) continue;
    await copyHostPath(p, stageRoot);
    copied.push(p);
  }
  return copied;
}

/** Where `name` is on the PATH of this process (as execFile finds it), or an error naming the PATH searched. */
export async function whichProgram(name: string, searchPath = process.env['PATH'] ?? ''): Promise<string> {
  for (const dir of searchPath.split(':').filter(Boolean)) {
    const candidate = path.join(dir, name);
    try {
      await fs.access(candidate, fs.constants.X_OK);
      if ((await fs.stat(candidate)).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  throw new HostFilesError(`${name} is not on the PATH (${searchPath}); the plugin runs it, so install it before building the image`);
}

/**
 * Sets every entry's times under `root` (root included, symlinks themselves)
 * to `epochSeconds`, so a layer's tar depends on content, not on when it was staged.
 */
export async function clampTimes(root: string, epochSeconds: number): Promise<void> {
  const entries = await fs.readdir(root, { withFileTypes: true });
  for (const e of entries) {
    const p = path.join(root, e.name);
    if (e.isDirectory()) await clampTimes(p, epochSeconds);
    else await fs.lutimes(p, epochSeconds, epochSeconds);
  }
  await fs.lutimes(root, epochSeconds, epochSeconds);
}
