// Public face of @csiplug/agent/testing: what tests and benchmarks of the
// agent use and the agent itself does not — the helpers that drive a real
// agent from outside (a free port, a pid check, a bounded poll). The
// in-memory AgentService is @csiplug/api/testing's.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export { freePort, isAlive, pollUntil } from '../commands/host';
