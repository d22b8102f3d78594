// Public face of @csiplug/agent.
// @csiplug/core first: it loads the Reflect metadata API tsyringe needs (an empty project's require of this package just works).
import '@csiplug/core';
export * from './agent';
export * from './api';
export { runAgentCommand, startAgentWithApi, loadAgentConfig, httpApiOptions, SHUTDOWN_TIMEOUT_MS, type AgentCommandOptions, type CommandIO } from './commands/agent-command';
export { DataDirError, DataDirInUseError, prepareDataDir, secureDataDir, tightenDataDir, lockDataDir } from './data-dir';
export { openLogSlice, memoryLogSlice, type LogRange, type LogSlice } from './log-slice';
export { runDemo, type DemoOptions } from './commands/demo';
export { main as runCli, parseArgs, UsageError, type CliHandlers, type CliIo } from './cli';
export * from './metrics';
export * from './model';
export * from './service';
// The agent's volume view (with this node's mounts) wins over the catalog's of the same name.
export type { VolumeView } from './service';
export * from './spec';
export * from '@csiplug/volumes';
export { hostpathPluginJobHcl, volumeHcl, workloadJobHcl } from './commands/specs';
