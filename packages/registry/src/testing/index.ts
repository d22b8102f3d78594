// Public face of @csiplug/registry/testing: a fake RegistryStore and the
// conformance suite every RegistryStore passes (the fake and the default
// state-backed store included). For tests only; nothing here is used by the
// registry itself.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export { FakeRegistryStore } from './fake-registry-store';
export { REGISTRY_STORE_CONFORMANCE } from './registry-store-conformance';
export type { RegistryStoreConformanceCase, RegistryStoreSubject } from './registry-store-conformance';
