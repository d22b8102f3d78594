// Public face of @csiplug/cli: every csiplug command over the API client.
// No bin of its own: @csiplug/agent's csiplug bin runs main() with the
// handlers of the two commands that load the agent (agent, demo).
export { UsageError, parseArgs, type FlagSpec, type ParsedArgs } from './args';
export type { CliHandlers, CliIo, CliOutput } from './io';
export { COMMANDS, main } from './main';
export { formatKV, formatTable } from './format';
