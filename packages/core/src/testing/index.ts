// @csiplug/core/testing: test support for the packages that build on core's
// contracts (a Clock tests move by hand).
import 'reflect-metadata';
export * from './fake-clock';
