// The local volume catalog: volumes and their claims, the VolumeClaimer
// contract, the volume spec and view types, and the catalog's tokens.
export * from './claim-rules';
export * from './csi-volume-name';
export * from './errors';
export * from './external-id-holder';
export * from './modes';
export * from './register';
export * from './tokens';
export { formatTopology, topologyContains } from './topology';
export * from './volume-catalog';
export * from './volume-catalog-service';
export * from './volume-claimer';
export { isVolumeOpIntent, type VolumeOp, type VolumeOpIntent, type VolumeOpView } from './volume-op-intent';
export type { VolumeRecord } from './volume-record';
export * from './volume-spec';
export * from './volume-view';
