// Tokens of the local volume catalog. registerVolumeCatalog binds
// IVolumeCatalog and IVolumeClaimer to one instance; IVolumeSpecValidator is
// bound by whoever reads volume specs (the agent).
import type { VolumeCatalogService } from './volume-catalog-service';
import type { VolumeClaimer } from './volume-claimer';
import type { VolumeSpecValidator } from './volume-spec';

export type IVolumeCatalog = VolumeCatalogService;
export const IVolumeCatalog: unique symbol = Symbol('IVolumeCatalog');

/** Claims volumes for allocs; the volume catalog implements it, a deployment may bind its own. */
export type IVolumeClaimer = VolumeClaimer;
export const IVolumeClaimer: unique symbol = Symbol('IVolumeClaimer');

/** The check every spec given to the catalog goes through; no default — the agent binds its spec reader's. */
export type IVolumeSpecValidator = VolumeSpecValidator;
export const IVolumeSpecValidator: unique symbol = Symbol('IVolumeSpecValidator');
