// @csiplug/images/testing: a real registry (docker-registry over TLS with
// basic auth, images pushed with skopeo) and test images built with umoci,
// for this package's tests and the agent's end-to-end tests.
export * from './image-builder';
export * from './registry-server';
