// @csiplug/core/testing: test support for the packages that build on core's
// contracts (a Clock tests move by hand).
export * from './fake-clock';
