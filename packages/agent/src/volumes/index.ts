// The local volume catalog's public face within the agent.
export * from './claim-rules';
export * from './errors';
export * from './register';
export * from './tokens';
export * from './volume-catalog';
export * from './volume-catalog-service';
export type { VolumeRecord } from './volume-record';
