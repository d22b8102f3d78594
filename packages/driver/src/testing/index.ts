// Public face of @csiplug/driver/testing: the test doubles of the TaskDriver
// contract and the contract's conformance suite (which needs jest, through
// the optional peer @jest/globals, only when a suite is described).
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './conformance';
export * from './fake-driver';
