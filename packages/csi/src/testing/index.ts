// @csiplug/csi/testing: the CSIClient fake for the tests of the packages
// above csi, and the contract suite that holds it to a real plugin.
export * from './csi-client-contract';
export * from './fake-csi-client';
export * from './fake-mount-points';
