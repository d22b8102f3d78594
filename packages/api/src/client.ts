// Public face of @csiplug/api/client: the typed API client and what its
// callers need beside it (the API's error, the wire protocol, the service's
// types). Its module graph stops here: loading it never loads the HTTP
// server, so a CLI or a script pays only for the client.
export * from './api-client';
export * from './api-error';
export * from './protocol';
export * from './service-errors';
export type * from './service';
export type { LogRange, LogSlice } from './log-slice';
export type { AllocStubView, DeploymentStub } from './wire/alloc-wire';
/** One line of /v1/event/stream (Nomad's Events envelope) back into csiplug's events, for readers of the raw stream. */
export { decodeEvents } from './wire/event-wire';
