// Public face of @csiplug/jobspec: the readers of text (jobspecs, agent
// configs, volume specs, the `${VAR}` interpolation applied to task config
// when a task starts), the job model, and the pure planning of a job change.
export * from './agent-config';
export { chrootEnvNotices } from './chroot-env';
export * from './api-access';
export * from './datacenters';
export { detectFormat, type DocumentFormat } from './document';
export * from './interpolate';
export * from './interpolation-check';
export * from './node-attributes';
export * from './node-config';
export * from './jobspec';
export * from './modes';
export * from './size';
export * from './volume-spec';
export * from './model';
export * from './job-diff';
export * from './job-history';
export * from './job-plan';
export * from './replacement-order';
export { DEFAULT_TEMPLATE, type TemplateDocument } from './template-spec';
export {
  GO_TEMPLATE_LIMITS,
  GoTemplateError,
  parseGoTemplate,
  type GoTemplate,
  type GoTemplateOptions,
  type RenderContext,
  type TemplateValue,
} from './go-template';
export * from './nomad-json';
