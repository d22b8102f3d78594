// Node events: what the agent shows about storage on this node ("Mount
// volume" / "Unmount volume", success or error), shaped after Nomad's.

export type NodeEventMessage = 'Mount volume' | 'Unmount volume';

export interface NodeEventDetails {
  volume_id: string;
  alloc_id: string;
  plugin_id: string;
  success: 'true' | 'false';
  error?: string;
}

export interface NodeEvent {
  readonly subsystem: 'Storage';
  readonly message: NodeEventMessage;
  readonly details: Readonly<NodeEventDetails>;
  /** ms since the epoch, from the Clock. */
  readonly time: number;
}
