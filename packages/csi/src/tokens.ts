// Tokens of @csiplug/csi: each a Symbol named like the interface it stands for.
import type { CSIClient, CSIClientOptions } from './client';

/** Makes CSI clients; one client per plugin socket. */
export interface CSIClientFactory {
  createClient(endpoint: string, options?: CSIClientOptions): CSIClient;
}

export type ICSIClientFactory = CSIClientFactory;
export const ICSIClientFactory: unique symbol = Symbol('ICSIClientFactory');
