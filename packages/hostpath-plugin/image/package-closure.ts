// A package's production dependency closure, found as Node finds modules,
// and copied into an image without what only development needs.
//
// The walk starts at <root>/node_modules/<name> and follows each package's
// `dependencies`, `optionalDependencies` (when installed) and
// `peerDependencies` (not those marked optional: @csiplug/core needs its
// tsyringe peer at run time; @types/node is an optional peer). Each name is
// resolved as Node does from the requiring package: its own node_modules,
// then each enclosing node_modules up to the root. A package keeps its
// place in the tree (node_modules/a/node_modules/b stays nested), so two
// versions of one package resolve in the image as on the host. A workspace
// package (npm's symlink to packages/<dir>) is looked up from its real
// directory first (Node follows the symlink), then from its place in the
// root node_modules — the same directories, as no packages/node_modules
// exists in this repository.
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import { ImageBuildError } from './errors';

export interface ClosurePackage {
  readonly name: string;
  readonly version: string;
  /** The package's real directory on this machine. */
  readonly hostDir: string;
  /** Its place under the app root, e.g. node_modules/@grpc/grpc-js. */
  readonly installPath: string;
  /** A workspace package (linked from packages/): shipped as its dist, package.json, bins and license. */
  readonly workspace: boolean;
}

export interface Manifest {
  name?: string;
  version?: string;
  repository?: string | { url?: string };
  bin?: string | Record<string, string>;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
}

export async function readManifest(dir: string): Promise<Manifest> {
  const file = path.join(dir, 'package.json');
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as Manifest;
  } catch (err) {
    throw new ImageBuildError(`cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** The directories whose node_modules Node searches from the package at `installPath`, nearest first (relative to the root). */
function lookupDirs(installPath: string): string[] {
  const out: string[] = [];
  let dir = installPath;
  for (;;) {
    const base = path.basename(dir);
    const inScope = base.startsWith('@') && path.basename(path.dirname(dir)) === 'node_modules';
    if (base !== 'node_modules' && !inScope) out.push(dir);
    if (dir === '.' || dir === '') break;
    dir = path.dirname(dir);
  }
  return out;
}

async function isPackageDir(dir: string): Promise<boolean> {
  return fs.stat(path.join(dir, 'package.json')).then(
    (st) => st.isFile(),
    () => false,
  );
}

/** The production closure of `name` (installed under `rootDir`/node_modules), `name` first. */
export async function productionClosure(rootDir: string, name: string): Promise<ClosurePackage[]> {
  const found = new Map<string, ClosurePackage>();
  const add = async (installPath: string): Promise<ClosurePackage> => {
    const known = found.get(installPath);
    if (known) return known;
    const linkPath = path.join(rootDir, installPath);
    const hostDir = await fs.realpath(linkPath);
    const manifest = await readManifest(hostDir);
    const pkg: ClosurePackage = {
      name: manifest.name ?? path.basename(installPath),
      version: manifest.version ?? '0.0.0',
      hostDir,
      installPath,
      workspace: (await fs.lstat(linkPath)).isSymbolicLink(),
    };
    found.set(installPath, pkg);
    return pkg;
  };
  const start = path.join('node_modules', name);
  if (!(await isPackageDir(path.join(rootDir, start))))
    throw new ImageBuildError(`${name} is not installed under ${rootDir}/node_modules; run npm ci at the repository root`);
  const queue = [await add(start)];
  while (queue.length > 0) {
    const pkg = queue.shift()!;
    const manifest = await readManifest(pkg.hostDir);
    const optionalPeers = manifest.peerDependenciesMeta ?? {};
    const wanted: { dep: string; required: boolean }[] = [
      ...Object.keys(manifest.dependencies ?? {}).map((dep) => ({ dep, required: true })),
      ...Object.keys(manifest.optionalDependencies ?? {}).map((dep) => ({ dep, required: false })),
      ...Object.keys(manifest.peerDependencies ?? {})
        .filter((dep) => optionalPeers[dep]?.optional !== true)
        .map((dep) => ({ dep, required: true })),
    ];
    for (const { dep, required } of wanted) {
      let resolved: string | undefined;
      for (const dir of lookupDirs(pkg.installPath)) {
        const candidate = path.join(dir, 'node_modules', dep);
        // The package's own node_modules is looked up in its real directory, as Node does.
        const onHost = dir === pkg.installPath ? path.join(pkg.hostDir, 'node_modules', dep) : path.join(rootDir, candidate);
        if (await isPackageDir(onHost)) {
          resolved = candidate;
          break;
        }
      }
      if (resolved === undefined) {
        if (!required) continue;
        throw new ImageBuildError(
          `${pkg.name} (${pkg.hostDir}) needs ${dep}, which is not installed where Node would find it; run npm ci at the repository root`,
        );
      }
      if (!found.has(resolved)) queue.push(await add(resolved));
    }
  }
  return [...found.values()];
}

/** A file only development needs: type declarations, TypeScript sources, tests, docs (licenses and notices stay). */
export function isDevFile(relPath: string): boolean {
  const base = path.basename(relPath);
  if (/\.d\.[cm]?ts(\.map)?$/.test(base)) return true;
  if (/\.[cm]?tsx?$/.test(base)) return true;
  if (/\.(spec|test)\.[cm]?[jt]s(\.map)?$/.test(base)) return true;
  if (/\.(md|markdown)$/i.test(base) && !/^(licen[cs]e|notice|copying)/i.test(base)) return true;
  return false;
}

/**
 * A top-level entry of a published package that only its development
 * needs: dotfiles (.github, .eslintrc, .npmignore…) and test, benchmark,
 * example and doc folders some packages publish.
 */
export function isDevTopLevelEntry(name: string, isDirectory: boolean): boolean {
  if (name.startsWith('.')) return true;
  return isDirectory && /^(tests?|__tests__|bench|benchmarks?|examples?|docs?|coverage)$/i.test(name);
}

/** The top-level entries of a workspace package that ship: its build, manifest, license and bins. */
async function workspaceEntries(pkg: ClosurePackage): Promise<string[]> {
  const manifest = await readManifest(pkg.hostDir);
  const bins = typeof manifest.bin === 'string' ? [manifest.bin] : Object.values(manifest.bin ?? {});
  const entries = new Set(['package.json', 'dist', ...bins.map((b) => path.normalize(b))]);
  for (const name of await fs.readdir(pkg.hostDir)) if (/^(licen[cs]e|notice)/i.test(name)) entries.add(name);
  if (!(await fs.stat(path.join(pkg.hostDir, 'dist')).catch(() => undefined)))
    throw new ImageBuildError(`${pkg.name} has no dist/ at ${pkg.hostDir}; build it first (npm run build)`);
  return [...entries];
}

/**
 * Copies `rel` (a file, directory or symlink under `fromRoot`) to the same
 * place under `toRoot`, leaving out node_modules (nested packages are
 * closure entries of their own) and dev files. Resolves with the native
 * addons (.node) copied. A directory left empty is not kept.
 */
async function copyFiltered(fromRoot: string, toRoot: string, rel: string, addons: string[]): Promise<boolean> {
  const from = path.join(fromRoot, rel);
  const to = path.join(toRoot, rel);
  const st = await fs.lstat(from);
  if (st.isSymbolicLink()) {
    await fs.symlink(await fs.readlink(from), to);
    return true;
  }
  if (st.isDirectory()) {
    if (path.basename(rel) === 'node_modules') return false;
    await fs.mkdir(to, { mode: 0o755 });
    let any = false;
    for (const name of (await fs.readdir(from)).sort()) any = (await copyFiltered(fromRoot, toRoot, path.join(rel, name), addons)) || any;
    if (!any) await fs.rmdir(to);
    return any;
  }
  if (!st.isFile() || isDevFile(rel)) return false;
  await fs.copyFile(from, to);
  await fs.chmod(to, st.mode & 0o755);
  if (rel.endsWith('.node')) addons.push(to);
  return true;
}

/**
 * Copies each package of the closure under `appRoot` (its installPath),
 * without dev files; resolves with the native addons copied, whose
 * libraries the image needs too.
 */
export async function copyClosure(closure: readonly ClosurePackage[], appRoot: string): Promise<string[]> {
  const addons: string[] = [];
  for (const pkg of closure) {
    const dest = path.join(appRoot, pkg.installPath);
    await fs.mkdir(dest, { recursive: true, mode: 0o755 });
    const entries = pkg.workspace
      ? await workspaceEntries(pkg)
      : (await fs.readdir(pkg.hostDir, { withFileTypes: true }))
          .filter((e) => !isDevTopLevelEntry(e.name, e.isDirectory()))
          .map((e) => e.name)
          .sort();
    for (const entry of entries) {
      await fs.mkdir(path.dirname(path.join(dest, entry)), { recursive: true, mode: 0o755 });
      await copyFiltered(pkg.hostDir, dest, entry, addons);
    }
  }
  return addons;
}
