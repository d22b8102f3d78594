// The agent's readers of text: jobspecs, agent configs, volume specs, and
// the `${VAR}` interpolation applied to task config when a task starts.
export * from './agent-config';
export * from './api-access';
export { detectFormat, type DocumentFormat } from './document';
export * from './interpolate';
export * from './jobspec';
export * from './modes';
export * from './size';
export * from './volume-spec';
