// Tokens of the volume reconciler.
import type { MountStore } from './mount-store';
import type { VolumeReconcilerService } from './reconciler-service';

/** Where the reconciler keeps its records; the default is the client state's csi/mounts bucket. */
export type IMountStore = MountStore;
export const IMountStore: unique symbol = Symbol('IMountStore');

/** The one owner of this node's volume mounts. */
export type IVolumeReconciler = VolumeReconcilerService;
export const IVolumeReconciler: unique symbol = Symbol('IVolumeReconciler');
