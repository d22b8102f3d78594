// Public face of @csiplug/agent: the Agent (composition and service facade),
// the agent and demo commands and their helpers. The jobspec, API, runner and
// CLI are their own packages (@csiplug/jobspec, api, runner, cli).
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './agent';
export {
  runAgentCommand,
  startAgentWithApi,
  loadAgentConfig,
  httpApiOptions,
  SHUTDOWN_TIMEOUT_MS,
  type AgentCommandOptions,
  type CommandIO,
} from './commands/agent-command';
export { DataDirError, DataDirInUseError, prepareDataDir, secureDataDir, tightenDataDir, lockDataDir } from './data-dir';
export { runDemo, type DemoOptions } from './commands/demo';
export { defaultHandlers } from './commands/handlers';
export * from './metrics';
export * from '@csiplug/volumes';
export { hostpathPluginJobHcl, volumeHcl, workloadJobHcl } from './commands/specs';
