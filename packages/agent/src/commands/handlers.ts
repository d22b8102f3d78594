// The commands that need a whole agent (`agent`, `demo`), wired in for
// bin.ts: flags are read here, the work is done in agent-command.ts and demo.ts.
import { runAgentCommand } from './agent-command';
import { runDemo } from './demo';
import { parseArgs, UsageError, type FlagSpec } from '@csiplug/cli';
import type { CliHandlers, CliIo } from '@csiplug/cli';

const AGENT_FLAGS: FlagSpec[] = [
  { name: 'config', kind: 'string', valueName: 'FILE', help: 'agent config file (HCL or JSON)' },
  { name: 'dev', kind: 'bool', help: 'throwaway agent: temporary data dir, in-memory state, tasks stopped on exit' },
  { name: 'stop-tasks-on-exit', kind: 'bool', help: 'stop every task when the agent exits (default: they keep running)' },
  {
    name: 'reconcile-orphans',
    kind: 'bool',
    help: 'at start, stop tasks, unmount mounts and remove alloc dirs that the state does not know (default: only warn about each)',
  },
  { name: 'data-dir', kind: 'string', valueName: 'DIR', help: 'overrides data_dir' },
  { name: 'port', kind: 'string', valueName: 'PORT', help: 'overrides port' },
  { name: 'log-level', kind: 'string', valueName: 'LEVEL', help: 'overrides log_level: trace, debug, info, warn or error' },
  { name: 'log-json', kind: 'bool', help: 'log one JSON object per line (as log_json = true) instead of lines for people' },
];

const DEMO_FLAGS: FlagSpec[] = [{ name: 'keep', kind: 'bool', help: 'keep the demo data dir afterwards' }];

function usage(io: CliIo, line: string, flags: FlagSpec[]): void {
  io.stdout.write(`${line}\n\n${flags.map((f) => `  -${f.name}${f.valueName ? ` ${f.valueName}` : ''}\n      ${f.help}`).join('\n')}\n`);
}

export function defaultHandlers(): CliHandlers {
  return {
    async agent(args, io) {
      let parsed;
      try {
        parsed = parseArgs(args, AGENT_FLAGS);
      } catch (err) {
        if (!(err instanceof UsageError)) throw err;
        io.stderr.write(`Error: ${err.message}\n`);
        return 1;
      }
      if (parsed.help) {
        usage(io, 'Usage: csiplug agent -config FILE | -dev [-stop-tasks-on-exit] [-reconcile-orphans]', AGENT_FLAGS);
        return 0;
      }
      const logLevel = parsed.flags.get('log-level') as string | undefined;
      if (logLevel !== undefined && !['trace', 'debug', 'info', 'warn', 'error'].includes(logLevel)) {
        io.stderr.write(`Error: -log-level must be trace, debug, info, warn or error, got "${logLevel}"\n`);
        return 1;
      }
      const port = parsed.flags.get('port');
      if (port !== undefined && !/^\d+$/.test(String(port))) {
        io.stderr.write(`Error: -port must be a number, got "${String(port)}"\n`);
        return 1;
      }
      return runAgentCommand(
        {
          configFile: parsed.flags.get('config') as string | undefined,
          dev: parsed.flags.get('dev') === true,
          stopTasksOnExit: parsed.flags.get('stop-tasks-on-exit') === true,
          reconcileOrphans: parsed.flags.get('reconcile-orphans') === true,
          dataDir: parsed.flags.get('data-dir') as string | undefined,
          port: port === undefined ? undefined : Number(port),
          ...(logLevel !== undefined ? { logLevel: logLevel as 'info' } : {}),
          logJson: parsed.flags.get('log-json') === true,
        },
        io,
      );
    },
    async demo(args, io) {
      let parsed;
      try {
        parsed = parseArgs(args, DEMO_FLAGS);
      } catch (err) {
        if (!(err instanceof UsageError)) throw err;
        io.stderr.write(`Error: ${err.message}\n`);
        return 1;
      }
      if (parsed.help) {
        usage(io, 'Usage: csiplug demo [-keep]', DEMO_FLAGS);
        return 0;
      }
      return runDemo({ keep: parsed.flags.get('keep') === true }, io);
    },
  };
}
