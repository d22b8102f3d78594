// The node's platform in OCI terms (GOOS/GOARCH/variant, as image indexes
// name them) and the choice of one manifest from an index for it, as
// containerd's platform matcher does for the common cases.
import { endianness } from 'node:os';
import { PlatformNotFoundError } from './errors';
import type { Descriptor, Platform } from './manifest';

/** Node's process.arch → GOARCH (+ the default variant where one matters). */
export function platformFor(arch: string, options: { endian?: 'BE' | 'LE'; armVersion?: string | number } = {}): Platform {
  switch (arch) {
    case 'x64':
      return { os: 'linux', architecture: 'amd64' };
    case 'arm64':
      return { os: 'linux', architecture: 'arm64', variant: 'v8' };
    case 'arm':
      return { os: 'linux', architecture: 'arm', variant: `v${options.armVersion ?? 7}` };
    case 'ia32':
      return { os: 'linux', architecture: '386' };
    case 'ppc64':
      return { os: 'linux', architecture: options.endian === 'BE' ? 'ppc64' : 'ppc64le' };
    case 'mipsel':
      return { os: 'linux', architecture: 'mipsle' };
    default:
      // s390x, riscv64, loong64, mips, ppc: Node and Go name them alike.
      return { os: 'linux', architecture: arch };
  }
}

/** This node's platform. */
export function nodePlatform(): Platform {
  const vars = (process.config.variables ?? {}) as Record<string, unknown>;
  const armVersion = typeof vars.arm_version === 'string' || typeof vars.arm_version === 'number' ? vars.arm_version : undefined;
  return platformFor(process.arch, { endian: endianness(), ...(armVersion !== undefined ? { armVersion } : {}) });
}

export function formatPlatform(p: Platform): string {
  return `${p.os}/${p.architecture}${p.variant ? `/${p.variant}` : ''}`;
}

/** arm64's v8 is the default: an entry without a variant matches it, as containerd normalises. */
function normalVariant(p: Platform): string | undefined {
  if (p.architecture === 'arm64' && (p.variant === undefined || p.variant === 'v8')) return 'v8';
  return p.variant;
}

/**
 * Picks the manifest for `wanted` from an index. An exact variant wins; an
 * entry without a variant is taken when no exact one exists; for arm, an
 * older variant (v6 on a v7 node) is the last resort. Attestation
 * manifests (platform unknown/unknown) never match.
 */
export function selectPlatformManifest(manifests: readonly Descriptor[], wanted: Platform, reference: string): Descriptor {
  const candidates = manifests.filter((m) => m.platform?.os === wanted.os && m.platform.architecture === wanted.architecture);
  const wantedVariant = normalVariant(wanted);
  const exact = candidates.find((m) => normalVariant(m.platform!) === wantedVariant);
  if (exact) return exact;
  const noVariant = candidates.find((m) => m.platform!.variant === undefined);
  if (noVariant) return noVariant;
  if (wanted.architecture === 'arm' && wantedVariant) {
    const mine = Number(wantedVariant.slice(1));
    const older = candidates
      .map((m) => ({ m, v: Number((m.platform!.variant ?? 'v0').slice(1)) }))
      .filter(({ v }) => Number.isFinite(v) && v < mine)
      .sort((a, b) => b.v - a.v)[0];
    if (older) return older.m;
  }
  throw new PlatformNotFoundError(
    reference,
    formatPlatform(wanted),
    manifests.filter((m) => m.platform).map((m) => formatPlatform(m.platform!)),
  );
}
