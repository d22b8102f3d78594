// registerVolumeCatalog binds the local volume catalog to IVolumeCatalog and
// IVolumeClaimer (@csiplug/hooks): one instance behind both. It expects the
// core bindings (IClock, ILogger), the client state (IClientStateDB), the
// plugin registry and the CSI manager to be bound by the time either token is
// first resolved. A deployment that bound its own IVolumeClaimer keeps it.
import { bindDefault } from '@csiplug/core';
import { IVolumeClaimer } from '@csiplug/hooks';
import type { DependencyContainer } from 'tsyringe';
import { IVolumeCatalog } from './tokens';
import { VolumeCatalog } from './volume-catalog';

export function registerVolumeCatalog(container: DependencyContainer): void {
  bindDefault(container, IVolumeCatalog, { useFactory: (c) => c.resolve(VolumeCatalog) });
  bindDefault(container, IVolumeClaimer, { useFactory: (c) => c.resolve<IVolumeCatalog>(IVolumeCatalog) });
}
