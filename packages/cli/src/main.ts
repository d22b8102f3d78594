// The `csiplug` command line: finds the command, parses its flags, runs it
// and turns every failure into `Error: …` on stderr and exit code 1. Usage
// mistakes print the command's usage as well; -h prints it on stdout.
import { errorMessage } from '@csiplug/core';
import * as fs from 'fs';
import * as path from 'path';
import { ALLOC_COMMANDS } from './alloc-commands';
import { UsageError, formatFlags, parseArgs } from './args';
import { type Command, commandFlags, makeContext } from './command';
import { wrap } from './format';
import type { CliHandlers, CliIo } from './io';
import { JOB_COMMANDS, PLAN_EXIT } from './job-commands';
import { PLUGIN_COMMANDS } from './plugin-commands';
import { NODE_COMMANDS } from './node-commands';
import { VOLUME_COMMANDS } from './volume-commands';

export const COMMANDS: readonly Command[] = [...JOB_COMMANDS, ...ALLOC_COMMANDS, ...NODE_COMMANDS, ...PLUGIN_COMMANDS, ...VOLUME_COMMANDS];

const GROUPS: Readonly<Record<string, string>> = {
  alloc: 'Inspect allocations and read their task logs',
  job: 'Run, stop and inspect jobs',
  node: 'Inspect this node: its drivers and CSI plugins',
  plugin: 'Inspect CSI plugins',
  volume: 'Register, create, remove and inspect CSI volumes',
};

const STANDALONE: Readonly<Record<string, string>> = {
  agent: 'Run the csiplug agent (-config FILE, or -dev)',
  demo: 'Walk through a plugin, a volume and a workload on a dev agent',
  version: 'Print the csiplug version',
};

const HELP_WORDS = new Set(['-h', '-help', '--help', '--h']);

/** Commands whose failures exit with another code than 1: job plan's 1 means "something would change", as in Nomad. */
const ERROR_EXIT_CODES: Readonly<Record<string, number>> = { 'job plan': PLAN_EXIT.error };

/** Runs the CLI with `argv` (the words after `csiplug`) and returns the exit code. */
export async function main(argv: readonly string[], io: CliIo, handlers?: CliHandlers): Promise<number> {
  try {
    return await dispatch([...argv], io, handlers);
  } catch (err) {
    // Commands report their own errors; this catches what escapes them.
    io.stderr.write(`Error: ${errorMessage(err)}\n`);
    return 1;
  }
}

async function dispatch(argv: string[], io: CliIo, handlers: CliHandlers | undefined): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined) {
    io.stderr.write(topUsage());
    return 1;
  }
  if (HELP_WORDS.has(first)) {
    io.stdout.write(topUsage());
    return 0;
  }
  if (first === 'help') return rest.length ? dispatch([...rest, '-h'], io, handlers) : (io.stdout.write(topUsage()), 0);
  if (first === 'version' || first === '-version' || first === '--version' || first === '-v') {
    io.stdout.write(`csiplug v${version()}\n`);
    return 0;
  }
  if (first === 'agent' || first === 'demo') {
    if (!handlers) {
      io.stderr.write(`Error: "csiplug ${first}" is not available in this build\n`);
      return 1;
    }
    return handlers[first](rest, io);
  }
  if (first in GROUPS) {
    const [sub, ...args] = rest;
    if (sub === undefined) {
      io.stderr.write(groupUsage(first));
      return 1;
    }
    if (HELP_WORDS.has(sub)) {
      io.stdout.write(groupUsage(first));
      return 0;
    }
    let cmd = COMMANDS.find((c) => c.name === `${first} ${sub}`);
    let cmdArgs = args;
    // Three words (volume snapshot create): the third names the command.
    const deeper = COMMANDS.filter((c) => c.name.startsWith(`${first} ${sub} `));
    if (!cmd && deeper.length) {
      const third = args[0];
      cmd = third === undefined ? undefined : deeper.find((c) => c.name === `${first} ${sub} ${third}`);
      cmdArgs = args.slice(1);
      if (!cmd) {
        const list = deeper.map((c) => `  ${c.name.padEnd(28)} ${c.synopsis}`).join('\n');
        const help = third !== undefined && HELP_WORDS.has(third);
        (help ? io.stdout : io.stderr).write(
          `${help || third === undefined ? '' : `Error: unknown command "${first} ${sub} ${third}"\n\n`}Usage: csiplug ${first} ${sub} <command> [options] [args]\n\n${list}\n`,
        );
        return help ? 0 : 1;
      }
    }
    if (!cmd) {
      io.stderr.write(`Error: unknown command "${first} ${sub}"\n\n${groupUsage(first)}`);
      return 1;
    }
    return runCommand(cmd, cmdArgs, io);
  }
  io.stderr.write(`Error: unknown command "${first}"\n\n${topUsage()}`);
  return 1;
}

async function runCommand(cmd: Command, argv: string[], io: CliIo): Promise<number> {
  const failed = ERROR_EXIT_CODES[cmd.name] ?? 1;
  try {
    const parsed = parseArgs(argv, commandFlags(cmd));
    if (parsed.help) {
      io.stdout.write(commandUsage(cmd));
      return 0;
    }
    const n = parsed.positionals.length;
    if (n < cmd.minArgs || n > cmd.maxArgs) {
      const want = cmd.minArgs === cmd.maxArgs ? `${cmd.minArgs}` : `${cmd.minArgs} to ${cmd.maxArgs}`;
      throw new UsageError(
        `this command takes ${want} argument${cmd.maxArgs === 1 ? '' : 's'} (${cmd.usageArgs}), got ${n}${n ? `: ${parsed.positionals.join(' ')}` : ''}`,
      );
    }
    return await cmd.run(makeContext(cmd, io, parsed));
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`Error: ${err.message}\n\n${usageLine(cmd)}\nRun 'csiplug ${cmd.name} -h' for help.\n`);
      return failed;
    }
    io.stderr.write(`Error: ${errorMessage(err)}\n`);
    return failed;
  }
}

// Help texts -------------------------------------------------------------------

function list(entries: Array<[string, string]>): string {
  const width = Math.max(...entries.map(([k]) => k.length));
  return entries.map(([k, v]) => `    ${k.padEnd(width)}    ${v}`).join('\n');
}

export function topUsage(): string {
  const entries: Array<[string, string]> = Object.entries({ ...GROUPS, ...STANDALONE }).sort(([a], [b]) => a.localeCompare(b));
  return `Usage: csiplug [-version] [-help] <command> [args]

Commands:
${list(entries)}

Run 'csiplug <command> -h' for help on a command. Flags are written -flag
as in Nomad's CLI; --flag works too.
`;
}

export function groupUsage(group: string): string {
  const cmds = COMMANDS.filter((c) => c.name.startsWith(`${group} `));
  return `Usage: csiplug ${group} <subcommand> [options] [args]

  ${GROUPS[group]}.

Subcommands:
${list(cmds.map((c) => [c.name.slice(group.length + 1), c.synopsis]))}

Run 'csiplug ${group} <subcommand> -h' for help on a subcommand.
`;
}

function usageLine(cmd: Command): string {
  return `Usage: csiplug ${cmd.name} [options]${cmd.usageArgs ? ` ${cmd.usageArgs}` : ''}`;
}

export function commandUsage(cmd: Command): string {
  const flags = commandFlags(cmd);
  return `${usageLine(cmd)}

${wrap(cmd.help)}
${flags.length ? `\nOptions:\n\n${formatFlags(flags)}\n` : ''}`;
}

function version(): string {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')) as { version?: string };
    return pkg.version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}
