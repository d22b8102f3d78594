// What the CSI manager knows about one plugin instance: health, identity and
// the fingerprinted node or controller info. Snapshots are plain frozen data.
import type { ControllerCapabilities, NodeCapabilities, PluginCapabilities } from '@csiplug/csi';
import type { PluginDeployment } from './plugin-options';

export interface NodePluginInfo {
  /** The node's id as the storage provider knows it (NodeGetInfo node_id; never empty). */
  nodeId: string;
  /** Volumes this node may hold; `Infinity` when the plugin reports 0 (no limit). */
  maxVolumes: number;
  /** Topology segments the node can reach, if the plugin reports any. */
  topology?: Readonly<Record<string, string>>;
  /** STAGE_UNSTAGE_VOLUME: volumes must be staged before they are published. */
  requiresStaging: boolean;
  /** GET_VOLUME_STATS. */
  supportsStats: boolean;
  /** EXPAND_VOLUME. */
  supportsExpand: boolean;
  /** VOLUME_CONDITION. */
  supportsCondition: boolean;
  capabilities: Readonly<NodeCapabilities>;
}

export interface ControllerPluginInfo {
  /** PUBLISH_UNPUBLISH_VOLUME: volumes are attached to a node by ControllerPublishVolume. */
  supportsAttachDetach: boolean;
  supportsCreateDelete: boolean;
  supportsExpand: boolean;
  supportsListVolumes: boolean;
  supportsGetCapacity: boolean;
  supportsSnapshots: boolean;
  supportsClone: boolean;
  supportsReadOnlyAttach: boolean;
  supportsCondition: boolean;
  capabilities: Readonly<ControllerCapabilities>;
}

export interface PluginInfo {
  /** `csi-node` or `csi-controller`. */
  readonly type: string;
  /** The plugin id. */
  readonly name: string;
  /** The alloc whose plugin task this instance talks to. */
  readonly allocId: string;
  readonly socketPath: string;
  readonly version: string;
  /** node, controller or monolith, from the registration's options. */
  readonly deployment: PluginDeployment;
  /** The instance answered a full fingerprint round and was healthy at the last one. */
  readonly healthy: boolean;
  /** At least one fingerprint round has succeeded since the instance started. */
  readonly fingerprinted: boolean;
  /** What the last round found: "healthy", or why it is not. */
  readonly description: string;
  readonly lastError?: string;
  /** When healthy, description or info last changed (ms since the epoch, from the Clock). */
  readonly updateTime: number;
  /** GetPluginCapabilities, once known. */
  readonly pluginCapabilities?: Readonly<PluginCapabilities>;
  /** csi-node instances, once fingerprinted. */
  readonly node?: Readonly<NodePluginInfo>;
  /** csi-controller instances, once fingerprinted. */
  readonly controller?: Readonly<ControllerPluginInfo>;
}

/** Fired by CSIManager.onDidChangeHealth when an instance's healthy flag changes (its first verdict counts). */
export interface PluginHealthChange {
  readonly type: string;
  readonly name: string;
  readonly allocId: string;
  readonly healthy: boolean;
  /** The flag before; undefined for an instance's first verdict. */
  readonly previous: boolean | undefined;
  readonly description: string;
  readonly lastError?: string;
  readonly info: PluginInfo;
  readonly time: number;
}

/**
 * Fired by CSIManager.onDidRetireInstance: the alloc an instance replaced
 * (create-before-destroy: the new one serves, the old alloc still ran) went
 * away — its registration deregistered. Mounts the old process served (FUSE,
 * network) go stale now, not when the new instance became ready.
 */
export interface PluginRetired {
  /** The instance serving now. */
  readonly info: PluginInfo;
  /** The alloc (and socket) that went away. */
  readonly retired: { readonly allocId: string; readonly socketPath: string };
  readonly time: number;
}

/** Fired by CSIManager.onDidBecomeReady: a plugin instance serves after it did not. */
export interface PluginReady {
  readonly info: PluginInfo;
  /**
   * `started`: a new instance's first healthy round (a plugin started, was
   * replaced by a new alloc or socket, or was found again after an agent
   * restart); `recovered`: healthy again after unhealthy rounds.
   */
  readonly cause: 'started' | 'recovered';
  /** The instance this one replaced (an upgrade, a restart under a new alloc or socket), if any. */
  readonly replaced?: { readonly allocId: string; readonly socketPath: string };
  readonly time: number;
}
