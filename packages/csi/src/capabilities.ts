// Capability helpers: turn the capability lists a plugin reports into plain
// flag objects, build VolumeCapability messages, and check a plugin's
// ValidateVolumeCapabilities confirmation against what was asked for.
// Capability types this version does not know (a newer plugin) are ignored.
import type { ControllerGetCapabilitiesResponse__Output } from './generated/csi/v1/ControllerGetCapabilitiesResponse';
import type { GetPluginCapabilitiesResponse__Output } from './generated/csi/v1/GetPluginCapabilitiesResponse';
import type { NodeGetCapabilitiesResponse__Output } from './generated/csi/v1/NodeGetCapabilitiesResponse';
import type { ValidateVolumeCapabilitiesResponse__Output } from './generated/csi/v1/ValidateVolumeCapabilitiesResponse';
import type { VolumeCapability, VolumeCapability__Output } from './generated/csi/v1/VolumeCapability';
import { ACCESS_MODES, type AccessMode } from './types';

export interface PluginCapabilities {
  /** CONTROLLER_SERVICE: the plugin serves the Controller RPCs. */
  controllerService: boolean;
  /** VOLUME_ACCESSIBILITY_CONSTRAINTS: volumes are not equally reachable from every node. */
  accessibilityConstraints: boolean;
  /** GROUP_CONTROLLER_SERVICE. */
  groupControllerService: boolean;
  /** VolumeExpansion ONLINE / OFFLINE, when reported. */
  onlineExpansion: boolean;
  offlineExpansion: boolean;
}

export interface NodeCapabilities {
  stageUnstageVolume: boolean;
  getVolumeStats: boolean;
  expandVolume: boolean;
  volumeCondition: boolean;
  singleNodeMultiWriter: boolean;
  volumeMountGroup: boolean;
}

export interface ControllerCapabilities {
  createDeleteVolume: boolean;
  publishUnpublishVolume: boolean;
  listVolumes: boolean;
  getCapacity: boolean;
  createDeleteSnapshot: boolean;
  listSnapshots: boolean;
  cloneVolume: boolean;
  publishReadonly: boolean;
  expandVolume: boolean;
  listVolumesPublishedNodes: boolean;
  volumeCondition: boolean;
  getVolume: boolean;
  singleNodeMultiWriter: boolean;
  modifyVolume: boolean;
}

export function pluginCapabilitiesFrom(
  response: Pick<GetPluginCapabilitiesResponse__Output, 'capabilities'> | null | undefined,
): PluginCapabilities {
  const caps: PluginCapabilities = {
    controllerService: false,
    accessibilityConstraints: false,
    groupControllerService: false,
    onlineExpansion: false,
    offlineExpansion: false,
  };
  for (const c of response?.capabilities ?? []) {
    switch (c.service?.type) {
      case 'CONTROLLER_SERVICE':
        caps.controllerService = true;
        break;
      case 'VOLUME_ACCESSIBILITY_CONSTRAINTS':
        caps.accessibilityConstraints = true;
        break;
      case 'GROUP_CONTROLLER_SERVICE':
        caps.groupControllerService = true;
        break;
      case 'UNKNOWN':
      case undefined:
        // A capability of no type (or of a kind this CSI version cannot name) grants nothing.
        break;
    }
    switch (c.volumeExpansion?.type) {
      case 'ONLINE':
        caps.onlineExpansion = true;
        break;
      case 'OFFLINE':
        caps.offlineExpansion = true;
        break;
      case 'UNKNOWN':
      case undefined:
        break;
    }
  }
  return caps;
}

const NODE_FLAGS: Record<string, keyof NodeCapabilities> = {
  STAGE_UNSTAGE_VOLUME: 'stageUnstageVolume',
  GET_VOLUME_STATS: 'getVolumeStats',
  EXPAND_VOLUME: 'expandVolume',
  VOLUME_CONDITION: 'volumeCondition',
  SINGLE_NODE_MULTI_WRITER: 'singleNodeMultiWriter',
  VOLUME_MOUNT_GROUP: 'volumeMountGroup',
};

export function nodeCapabilitiesFrom(
  response: Pick<NodeGetCapabilitiesResponse__Output, 'capabilities'> | null | undefined,
): NodeCapabilities {
  const caps: NodeCapabilities = {
    stageUnstageVolume: false,
    getVolumeStats: false,
    expandVolume: false,
    volumeCondition: false,
    singleNodeMultiWriter: false,
    volumeMountGroup: false,
  };
  for (const c of response?.capabilities ?? []) {
    const flag = c.rpc ? NODE_FLAGS[String(c.rpc.type)] : undefined;
    if (flag) caps[flag] = true;
  }
  return caps;
}

const CONTROLLER_FLAGS: Record<string, keyof ControllerCapabilities> = {
  CREATE_DELETE_VOLUME: 'createDeleteVolume',
  PUBLISH_UNPUBLISH_VOLUME: 'publishUnpublishVolume',
  LIST_VOLUMES: 'listVolumes',
  GET_CAPACITY: 'getCapacity',
  CREATE_DELETE_SNAPSHOT: 'createDeleteSnapshot',
  LIST_SNAPSHOTS: 'listSnapshots',
  CLONE_VOLUME: 'cloneVolume',
  PUBLISH_READONLY: 'publishReadonly',
  EXPAND_VOLUME: 'expandVolume',
  LIST_VOLUMES_PUBLISHED_NODES: 'listVolumesPublishedNodes',
  VOLUME_CONDITION: 'volumeCondition',
  GET_VOLUME: 'getVolume',
  SINGLE_NODE_MULTI_WRITER: 'singleNodeMultiWriter',
  MODIFY_VOLUME: 'modifyVolume',
};

export function controllerCapabilitiesFrom(
  response: Pick<ControllerGetCapabilitiesResponse__Output, 'capabilities'> | null | undefined,
): ControllerCapabilities {
  const caps: ControllerCapabilities = {
    createDeleteVolume: false,
    publishUnpublishVolume: false,
    listVolumes: false,
    getCapacity: false,
    createDeleteSnapshot: false,
    listSnapshots: false,
    cloneVolume: false,
    publishReadonly: false,
    expandVolume: false,
    listVolumesPublishedNodes: false,
    volumeCondition: false,
    getVolume: false,
    singleNodeMultiWriter: false,
    modifyVolume: false,
  };
  for (const c of response?.capabilities ?? []) {
    const flag = c.rpc ? CONTROLLER_FLAGS[String(c.rpc.type)] : undefined;
    if (flag) caps[flag] = true;
  }
  return caps;
}

// ------------------------------------------------------------------ builders

export interface MountOptions {
  fsType?: string;
  mountFlags?: string[];
  volumeMountGroup?: string;
}

/** A filesystem-access capability: `mountCapability('SINGLE_NODE_WRITER', { fsType: 'ext4' })`. */
export function mountCapability(accessMode: AccessMode, options: MountOptions = {}): VolumeCapability {
  return {
    mount: { fsType: options.fsType ?? '', mountFlags: [...(options.mountFlags ?? [])], volumeMountGroup: options.volumeMountGroup ?? '' },
    accessMode: { mode: accessMode },
  };
}

/** A raw-block-access capability. */
export function blockCapability(accessMode: AccessMode): VolumeCapability {
  return { block: {}, accessMode: { mode: accessMode } };
}

export type AccessType = 'mount' | 'block';

/** Which access type a capability asks for, or undefined when it names none (or both). */
export function accessTypeOf(cap: VolumeCapability | VolumeCapability__Output | null | undefined): AccessType | undefined {
  if (!cap) return undefined;
  const hasMount = cap.mount !== undefined && cap.mount !== null;
  const hasBlock = cap.block !== undefined && cap.block !== null;
  if (hasMount === hasBlock) return undefined;
  return hasMount ? 'mount' : 'block';
}

function modeName(mode: unknown): string {
  if (typeof mode === 'number') return ['UNKNOWN', ...ACCESS_MODES][mode] ?? `MODE_${mode}`;
  return String(mode ?? 'UNKNOWN');
}

/** Problems with a capability's shape (missing access type/mode); empty when it is well formed. */
export function volumeCapabilityProblems(cap: VolumeCapability | null | undefined, what = 'volume_capability'): string[] {
  if (!cap) return [`${what} is required`];
  const problems: string[] = [];
  if (!accessTypeOf(cap)) problems.push(`${what} must set exactly one access type (mount or block)`);
  const mode = modeName(cap.accessMode?.mode);
  if (!ACCESS_MODES.includes(mode as AccessMode))
    problems.push(`${what}.access_mode is required (one of ${ACCESS_MODES.join(', ')}), got ${mode}`);
  return problems;
}

export type CapabilityCheck = { ok: true } | { ok: false; reason: string };

function describeCap(cap: VolumeCapability | VolumeCapability__Output): string {
  const type = accessTypeOf(cap) ?? 'no access type';
  const fs = cap.mount?.fsType ? ` fs ${cap.mount.fsType}` : '';
  return `${type} ${modeName(cap.accessMode?.mode)}${fs}`;
}

function matches(requested: VolumeCapability, confirmed: VolumeCapability__Output): boolean {
  if (accessTypeOf(requested) !== accessTypeOf(confirmed)) return false;
  if (modeName(requested.accessMode?.mode) !== modeName(confirmed.accessMode?.mode)) return false;
  if (accessTypeOf(requested) === 'mount') {
    const want = requested.mount ?? {};
    const got = confirmed.mount;
    if ((want.fsType ?? '') !== (got?.fsType ?? '')) return false;
    const gotFlags = new Set(got?.mountFlags ?? []);
    if (!(want.mountFlags ?? []).every((f) => gotFlags.has(f))) return false;
    if ((want.volumeMountGroup ?? '') !== '' && want.volumeMountGroup !== got?.volumeMountGroup) return false;
  }
  return true;
}

/**
 * Checks a ValidateVolumeCapabilities answer against the capabilities that
 * were asked for. The spec makes this the caller's job: an older plugin may
 * "confirm" a capability while silently ignoring fields it does not know,
 * so each requested capability must come back with the same access type,
 * access mode, fs type, mount group, and every requested mount flag.
 */
export function checkConfirmedCapabilities(
  requested: readonly VolumeCapability[],
  response: Pick<ValidateVolumeCapabilitiesResponse__Output, 'confirmed' | 'message'> | null | undefined,
): CapabilityCheck {
  const confirmed = response?.confirmed;
  if (!confirmed) {
    const why = response?.message ? `: ${response.message}` : '';
    return { ok: false, reason: `the plugin did not confirm the volume capabilities${why}` };
  }
  for (const want of requested) {
    if (!confirmed.volumeCapabilities.some((got) => matches(want, got))) {
      return {
        ok: false,
        reason: `the plugin did not confirm capability ${describeCap(want)} as requested (mount flags and fs type included)`,
      };
    }
  }
  return { ok: true };
}
