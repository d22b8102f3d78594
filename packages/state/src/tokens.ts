// Tokens owned by @csiplug/state.
import type { ClientStateDB } from './client-state';

export type IClientStateDB = ClientStateDB;
export const IClientStateDB: unique symbol = Symbol('IClientStateDB');
