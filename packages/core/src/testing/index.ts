// @csiplug/core/testing: test support for the packages that build on core's
// contracts (a Clock tests move by hand; requireRoot for the tests that need root).
import 'reflect-metadata';
export * from './fake-clock';
export * from './require-root';
