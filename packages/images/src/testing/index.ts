// @csiplug/images/testing: helpers for tests in this package and above it:
// a real registry (docker-registry over TLS with basic auth, images pushed
// with skopeo), test images built with umoci, and a tiny tar writer that
// builds layer archives (and broken ones) in memory; host programs with
// their libraries staged for a layer.
export * from './tar-writer';
export * from './image-builder';
export * from './host-files';
export * from './registry-server';
export * from './host-binaries';
