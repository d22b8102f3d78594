// What a plugin registration is: the input a plugin supervisor gives the
// registry, and the read-only view the registry hands back.

/** A CSI controller plugin (one per plugin name per alloc). */
export const PluginTypeCSIController = 'csi-controller';
/** A CSI node plugin. A monolith plugin registers both types. */
export const PluginTypeCSINode = 'csi-node';
/** The types every registry knows; a deployment may add more. */
export const DEFAULT_PLUGIN_TYPES: readonly string[] = Object.freeze([PluginTypeCSIController, PluginTypeCSINode]);

/** What a plugin supervisor registers. */
export interface PluginRegistration {
  /** One of the registry's known types (`csi-controller`, `csi-node`, …). */
  type: string;
  /** The plugin id; it becomes a path component, so it is checked like one. */
  name: string;
  /** The plugin's own version string, as its GetPluginInfo reports it. */
  version?: string;
  /** The alloc running the plugin task; a path component, checked like one. */
  allocId: string;
  /** Connection info: the plugin's unix socket. */
  socketPath: string;
  /** Further metadata for other subsystems, e.g. mount points. */
  options?: Record<string, string>;
}

/**
 * One registration as the registry holds it. Objects are frozen snapshots:
 * a later change to the registry produces new objects, never edits these.
 */
export interface RegisteredPlugin {
  readonly type: string;
  readonly name: string;
  readonly version: string;
  readonly allocId: string;
  readonly socketPath: string;
  readonly options: Readonly<Record<string, string>>;
  /**
   * True when the entry was read back from the state DB on start and its
   * plugin has not re-registered since, nor has the CSI manager confirmed it
   * alive (`confirmAlive`). Its socket may be dead: callers that dispense it
   * should expect to fingerprint it first.
   */
  readonly restored: boolean;
}
