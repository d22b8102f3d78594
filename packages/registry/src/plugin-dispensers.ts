// Dispensers turn a registration into a client for it. The registry owns no
// transport: whoever talks to a plugin type (the CSI manager for csi-node and
// csi-controller) registers a dispenser for that type.
import { type Disposable, toDisposable } from '@csiplug/core';
import { DuplicateDispenserError } from './errors';
import type { RegisteredPlugin } from './plugin-types';

/** Makes a client (e.g. a CSIClient) for an active registration. */
export type PluginDispenser<T = unknown> = (plugin: RegisteredPlugin) => T;

/** The per-type dispenser table, bound to IPluginDispensers. */
export interface PluginDispensers {
  /** Adds the dispenser for `type`; a second one for the same type is an error. Disposing removes it. */
  register(type: string, dispenser: PluginDispenser): Disposable;
  get(type: string): PluginDispenser | undefined;
}

export class PluginDispenserTable implements PluginDispensers {
  private readonly dispensers = new Map<string, PluginDispenser>();

  constructor(initial: Record<string, PluginDispenser> = {}) {
    for (const [type, dispenser] of Object.entries(initial)) this.register(type, dispenser);
  }

  register(type: string, dispenser: PluginDispenser): Disposable {
    if (this.dispensers.has(type)) throw new DuplicateDispenserError(type);
    this.dispensers.set(type, dispenser);
    return toDisposable(() => {
      if (this.dispensers.get(type) === dispenser) this.dispensers.delete(type);
    });
  }

  get(type: string): PluginDispenser | undefined {
    return this.dispensers.get(type);
  }
}
