// Public face of @csiplug/volumes/testing: test doubles of what the volume
// reconciler depends on (its MountStore, the VolumeClaimer) and the
// MountStore contract's conformance suite (which needs jest, through
// @jest/globals, only when a suite is described). For tests only; nothing
// here is used by the package itself.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export { FakeClaimer } from './fake-claimer';
export { FakeMountStore } from './fake-mount-store';
export { bareMountRecord, describeMountStoreContract, fullMountRecord } from './mount-store-contract';
export type { MountStoreContractSubject } from './mount-store-contract';
