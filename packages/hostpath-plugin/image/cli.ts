#!/usr/bin/env node
// `npm run image:hostpath [-- --out DIR] [--push registry/repo:tag
// [--dest-cert-dir DIR] [--dest-creds user:pass]]`: builds the hostpath
// plugin's OCI image (build-image.ts) and prints where it is, its tags,
// manifest digest and size; with --push, copies it to a registry
// (push-image.ts).
import * as path from 'node:path';
import { errorMessage } from '@csiplug/core';
import { type BuiltImage, buildHostpathImage, findRepoRoot } from './build-image';
import { ImageBuildError } from './errors';
import { pushImage } from './push-image';

export const IMAGE_USAGE = `usage: npm run image:hostpath -- [--out DIR] [--push REGISTRY/REPO:TAG [--dest-cert-dir DIR] [--dest-creds USER:PASSWORD]]
  --out DIR            the OCI layout to write, default dist/image/hostpath-plugin at the repository root
  --push REF           after the build, copy the image to REF with skopeo (the version tag's image)
  --dest-cert-dir DIR  passed to skopeo: a directory holding the registry's ca.crt
  --dest-creds U:P     passed to skopeo: the registry's user and password
  SOURCE_DATE_EPOCH    seconds since 1970 for every time in the image, default 0`;

export interface ImageCliArgs {
  out?: string;
  push?: string;
  destCertDir?: string;
  destCreds?: string;
  help: boolean;
}

const FLAGS: Record<string, keyof Omit<ImageCliArgs, 'help'>> = {
  '--out': 'out',
  '--push': 'push',
  '--dest-cert-dir': 'destCertDir',
  '--dest-creds': 'destCreds',
};

export function parseImageArgs(argv: readonly string[]): ImageCliArgs {
  const args: ImageCliArgs = { help: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') {
      args.help = true;
      continue;
    }
    const [flag, inline] =
      arg.startsWith('--') && arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const key = FLAGS[flag!];
    if (key === undefined) throw new ImageBuildError(`unknown argument ${arg}\n${IMAGE_USAGE}`);
    const value = inline ?? argv[++i];
    if (value === undefined || value === '') throw new ImageBuildError(`${flag} needs a value\n${IMAGE_USAGE}`);
    args[key] = value;
  }
  if ((args.destCertDir !== undefined || args.destCreds !== undefined) && args.push === undefined)
    throw new ImageBuildError('--dest-cert-dir and --dest-creds go with --push');
  return args;
}

export function epochFromEnv(value: string | undefined): number {
  if (value === undefined || value === '') return 0;
  if (!/^\d+$/.test(value)) throw new ImageBuildError(`SOURCE_DATE_EPOCH=${value} is not a number of seconds since 1970`);
  return Number(value);
}

export function describeImage(image: BuiltImage): string {
  const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;
  return [
    `layout:   ${image.layoutDir}`,
    `tags:     ${image.tags.join(', ')}  (oci:${image.layoutDir}:${image.tags[0]})`,
    `manifest: ${image.manifestDigest}`,
    `size:     ${mb(image.size)} (${image.size} bytes: manifest, config and compressed layers)`,
    `entrypoint: ${JSON.stringify(image.entrypoint)}`,
    ...image.layers.map((l, i) => `layer ${i + 1}: ${l.digest} ${mb(l.size)}  ${l.createdBy}`),
  ].join('\n');
}

async function main(): Promise<void> {
  const args = parseImageArgs(process.argv.slice(2));
  if (args.help) {
    process.stdout.write(`${IMAGE_USAGE}\n`);
    return;
  }
  const repoRoot = await findRepoRoot(__dirname);
  const image = await buildHostpathImage({
    out: args.out ?? path.join(repoRoot, 'dist', 'image', 'hostpath-plugin'),
    repoRoot,
    epochSeconds: epochFromEnv(process.env['SOURCE_DATE_EPOCH']),
  });
  process.stdout.write(`${describeImage(image)}\n`);
  if (args.push !== undefined) {
    await pushImage({
      layoutDir: image.layoutDir,
      tag: image.tags[0]!,
      destination: args.push,
      ...(args.destCertDir !== undefined ? { destCertDir: args.destCertDir } : {}),
      ...(args.destCreds !== undefined ? { destCreds: args.destCreds } : {}),
    });
    process.stdout.write(`pushed:   docker://${args.push.replace(/^docker:\/\//, '')}\n`);
  }
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`image:hostpath: ${errorMessage(err)}\n`);
    process.exit(1);
  });
}
