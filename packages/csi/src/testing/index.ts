// @csiplug/csi/testing: the CSIClient fake for the tests of the packages
// above csi, and the contract suite that holds it to a real plugin.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './csi-client-contract';
export * from './fake-csi-client';
export * from './fake-mount-points';
