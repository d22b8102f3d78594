// registerVolumeCatalog binds the local volume catalog to IVolumeCatalog and
// IVolumeClaimer: one instance behind both. It expects the core bindings
// (IClock, ILogger), the client state's volume store (IVolumeStateStore, bound by registerState), the plugin registry,
// the CSI manager and an IVolumeSpecValidator to be bound by the time either
// token is first resolved; without a validator it refuses to build the
// catalog rather than take specs unchecked. A deployment that bound its own
// IVolumeClaimer keeps it.
import { bindDefault } from '@csiplug/core';
import type { DependencyContainer } from 'tsyringe';
import { VolumeSpecValidatorMissingError } from './errors';
import { IVolumeCatalog, IVolumeClaimer, IVolumeSpecValidator } from './tokens';
import { VolumeCatalog } from './volume-catalog';

export function registerVolumeCatalog(container: DependencyContainer): void {
  bindDefault(container, IVolumeCatalog, {
    useFactory: (c) => {
      if (!c.isRegistered(IVolumeSpecValidator, true)) throw new VolumeSpecValidatorMissingError();
      return c.resolve(VolumeCatalog);
    },
  });
  bindDefault(container, IVolumeClaimer, { useFactory: (c) => c.resolve<IVolumeCatalog>(IVolumeCatalog) });
}
