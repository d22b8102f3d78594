// @csiplug/csimanager/testing: fakes of the CSI manager's contracts for the
// tests of the packages above it (the manager, its volume managers, the
// mount table), and the contract suites that hold them to the real ones.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './csi-manager-contract';
export * from './fake-csi-manager';
export * from './fake-mount-table';
export * from './fake-volume-manager';
export * from './mount-table-contract';
