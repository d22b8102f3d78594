// Tokens of the local volume catalog. IVolumeClaimer (@csiplug/hooks) is bound
// to the same instance by registerVolumeCatalog.
import type { VolumeCatalogService } from './volume-catalog-service';

export type IVolumeCatalog = VolumeCatalogService;
export const IVolumeCatalog: unique symbol = Symbol('IVolumeCatalog');
