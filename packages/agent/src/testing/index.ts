// Public face of @csiplug/agent/testing: what tests and benchmarks of the
// agent use and the agent itself does not — an in-memory AgentService for
// tests of the HTTP API, the CLI and their clients, and the helpers that
// drive a real agent from outside (a free port, a pid check, a bounded poll).
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './fake-agent-service';
export { freePort, isAlive, pollUntil } from '../commands/host';
