// Public face of @csiplug/api/testing: an in-memory AgentService for tests of
// the HTTP API, the CLI and their clients, and helpers for them (documents,
// a raw request, a server on 127.0.0.1:0 over any AgentService).
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './fake-agent-service';
export * from './http';
