// The csiplug command line, for bin.ts and for whoever embeds or tests it.
export { UsageError, parseArgs, type FlagSpec, type ParsedArgs } from './args';
export type { CliHandlers, CliIo, CliOutput } from './io';
export { COMMANDS, main } from './main';
export { formatKV, formatTable } from './format';
