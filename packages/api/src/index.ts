// Public face of @csiplug/api: the service interface the routes depend on,
// the HTTP server over it and its typed client. The client alone (without the
// server) is @csiplug/api/client; the in-memory service for tests of either
// is @csiplug/api/testing.
export * from './client';
export * from './agent-events';
export { ConnectionGate, DEFAULT_CONNECTION_LIMITS, OVERFLOW_RESERVE, type Admission, type ConnectionLimits } from './connection-gate';
export { EVENT_HEARTBEAT_MS, EVENT_TOPICS } from './event-stream';
export * from './http-api';
export type { HttpApiOptions, MetricsSource } from './http-api-options';
export { REDACTED } from './wire/volume-wire';
export { openLogSlice, memoryLogSlice, resolveLogRange } from './log-slice';
export { DEFAULT_MAX_BODY_BYTES, MAX_JSON_DEPTH } from './request-body';
export { RequestGuard, type RequestGuardOptions } from './request-guard';
export { StatusPage, STATUS_PAGE_DIR, STATUS_PAGE_HEADERS, type StaticFile } from './status-page';
