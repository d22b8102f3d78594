// The agent's HTTP API: the server over AgentService and its typed client.
// The in-memory AgentService for tests of either is in src/testing
// (@csiplug/agent/testing).
export * from './api-client';
export * from './api-error';
export { ConnectionGate, DEFAULT_CONNECTION_LIMITS, OVERFLOW_RESERVE, type Admission, type ConnectionLimits } from './connection-gate';
export { EVENT_HEARTBEAT_MS, EVENT_TOPICS } from './event-stream';
export * from './http-api';
export * from './protocol';
export { DEFAULT_MAX_BODY_BYTES, MAX_JSON_DEPTH } from './request-body';
export { RequestGuard, type RequestGuardOptions } from './request-guard';
export { StatusPage, STATUS_PAGE_DIR, STATUS_PAGE_HEADERS, type StaticFile } from './status-page';
