// Tokens owned by @csiplug/state. registerState binds IClientStateDB, and
// the narrow tokens to the same instance, so a package can ask for only the
// store it uses.
import type { AllocStateStore } from './alloc-state-store';
import type { ClientStateDB } from './client-state';
import type { RegistryStateStore } from './registry-state-store';
import type { VolumeStateStore } from './volume-state-store';

export type IClientStateDB = ClientStateDB;
export const IClientStateDB: unique symbol = Symbol('IClientStateDB');

export type IRegistryStateStore = RegistryStateStore;
export const IRegistryStateStore: unique symbol = Symbol('IRegistryStateStore');

export type IAllocStateStore = AllocStateStore;
export const IAllocStateStore: unique symbol = Symbol('IAllocStateStore');

export type IVolumeStateStore = VolumeStateStore;
export const IVolumeStateStore: unique symbol = Symbol('IVolumeStateStore');
