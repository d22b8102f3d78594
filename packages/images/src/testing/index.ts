// @csiplug/images/testing: helpers for tests in this package and above it:
// a tiny tar writer that builds layer archives (and broken ones) in memory.
export * from './tar-writer';
