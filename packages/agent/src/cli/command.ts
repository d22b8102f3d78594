// One CLI command: its name, arguments, flags, help and what it does. The
// runner in main.ts parses the flags, builds the API client from -address /
// -token (or CSIPLUG_ADDR / CSIPLUG_TOKEN) and hands over a CommandContext.
import * as fs from 'fs';
import * as path from 'path';
import { ApiClient, ApiError, DEFAULT_ADDRESS } from '../api';
import type { FlagSpec, ParsedArgs } from './args';
import { UsageError, boolFlag } from './args';
import { formatJson } from './format';
import type { CliIo } from './io';

export const ADDRESS_FLAG: FlagSpec = {
  name: 'address',
  kind: 'string',
  valueName: 'addr',
  env: 'CSIPLUG_ADDR',
  dflt: DEFAULT_ADDRESS,
  help: "The address of the csiplug agent's HTTP API.",
};
export const TOKEN_FLAG: FlagSpec = { name: 'token', kind: 'string', valueName: 'token', env: 'CSIPLUG_TOKEN', help: 'The ACL token, sent as X-Csiplug-Token.' };
export const JSON_FLAG: FlagSpec = { name: 'json', kind: 'bool', help: 'Print the API\'s JSON instead of tables.' };
export const VERBOSE_FLAG: FlagSpec = { name: 'verbose', kind: 'bool', help: 'Show full ids.' };

export interface CommandContext {
  io: CliIo;
  parsed: ParsedArgs;
  /** The positionals, checked against the command's count. */
  args: string[];
  /** -json was given. */
  json: boolean;
  /** -verbose was given. */
  verbose: boolean;
  /** The API client (throws a UsageError for commands that take no -address). */
  client(): ApiClient;
  flag(name: string): boolean;
  stringFlag(name: string): string | undefined;
  /** Writes to stdout. */
  out(text: string): void;
  /** Prints `value` as JSON. */
  printJson(value: unknown): void;
  /** Reads FILE (or stdin for `-`). */
  readFile(file: string): Promise<string>;
}

export interface Command {
  /** Words after `csiplug`, e.g. `job run`. */
  name: string;
  /** Positional arguments in usage, e.g. `FILE` or `[ID]`. */
  usageArgs: string;
  /** One line, for the group's list. */
  synopsis: string;
  /** Paragraphs for `-h`. */
  help: string;
  minArgs: number;
  maxArgs: number;
  /** Talks to the agent: takes -address and -token. */
  api: boolean;
  /** Takes -json. */
  json: boolean;
  /** Its own flags (besides -address, -token, -json). */
  flags?: FlagSpec[];
  run(ctx: CommandContext): Promise<number>;
}

/** Every flag the command takes, in help order. */
export function commandFlags(cmd: Command): FlagSpec[] {
  return [...(cmd.api ? [ADDRESS_FLAG, TOKEN_FLAG] : []), ...(cmd.json ? [JSON_FLAG] : []), ...(cmd.flags ?? [])];
}

export function makeContext(cmd: Command, io: CliIo, parsed: ParsedArgs): CommandContext {
  let client: ApiClient | undefined;
  const stringFlag = (name: string) => {
    const v = parsed.flags.get(name);
    return typeof v === 'string' ? v : undefined;
  };
  const envOf = (name: string) => {
    const v = io.env[name];
    return v === undefined || v === '' ? undefined : v;
  };
  return {
    io,
    parsed,
    args: parsed.positionals,
    json: boolFlag(parsed, 'json'),
    verbose: boolFlag(parsed, 'verbose'),
    client() {
      if (!cmd.api) throw new UsageError(`${cmd.name} does not talk to the agent`);
      client ??= new ApiClient({ address: stringFlag('address') ?? envOf('CSIPLUG_ADDR'), token: stringFlag('token') ?? envOf('CSIPLUG_TOKEN') });
      return client;
    },
    flag: (name) => boolFlag(parsed, name),
    stringFlag,
    out: (text) => void io.stdout.write(text.endsWith('\n') || text === '' ? text : `${text}\n`),
    printJson: (value) => void io.stdout.write(formatJson(value)),
    readFile: (file) => readInput(io, file),
  };
}

async function readInput(io: CliIo, file: string): Promise<string> {
  if (file === '-') {
    if (!io.stdin) throw new UsageError('cannot read "-": no standard input here');
    const chunks: Buffer[] = [];
    for await (const chunk of io.stdin) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
    return Buffer.concat(chunks).toString('utf8');
  }
  const full = path.resolve(io.cwd ?? process.cwd(), file);
  try {
    return await fs.promises.readFile(full, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : (err as Error).message;
    throw new UsageError(`cannot read ${file}: ${why}`);
  }
}

/** The file name for parse errors: "-" reads as stdin. */
export function inputName(file: string): string {
  return file === '-' ? '<stdin>' : file;
}

/** True for the API's "not found" answer. */
export function isNotFound(err: unknown): err is ApiError {
  return err instanceof ApiError && err.status === 404;
}
