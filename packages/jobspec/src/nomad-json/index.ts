// Nomad's JSON job format, both ways, and the bodies of Nomad's job write
// requests: what the HTTP API takes and answers for jobs, and what the CLI sends.
export { jobFromNomadJson } from './from-nomad-json';
export {
  jobToNomadJson,
  type NomadJob,
  type NomadRestartPolicy,
  type NomadTask,
  type NomadTaskGroup,
  type NomadTemplate,
  type NomadUpdateStrategy,
  type NomadVolumeRequest,
} from './to-nomad-json';
export { readJobPlanRequest, readJobRegisterRequest, readJobsParseRequest } from './job-requests';
