// The agent's HTTP API: the server over AgentService, its typed client, and
// an in-memory AgentService for tests of either.
export * from './api-client';
export * from './api-error';
export { ConnectionGate, DEFAULT_CONNECTION_LIMITS, OVERFLOW_RESERVE, type Admission, type ConnectionLimits } from './connection-gate';
export { EVENT_HEARTBEAT_MS, EVENT_TOPICS } from './event-stream';
export * from './fake-agent-service';
export * from './http-api';
export * from './protocol';
export { DEFAULT_MAX_BODY_BYTES, MAX_JSON_DEPTH } from './request-body';
export { RequestGuard, type RequestGuardOptions } from './request-guard';
