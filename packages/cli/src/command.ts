// One CLI command: its name, arguments, flags, help and what it does. The
// runner in main.ts parses the flags, builds the API client from -address,
// -token, -timeout, -ca-cert and -tls-skip-verify (or their environment
// variables) and hands over a CommandContext.
import { ValidationError, parseDuration } from '@csiplug/core';
import * as fs from 'fs';
import * as path from 'path';
import { ApiClient, ApiError, DEFAULT_ADDRESS } from '@csiplug/api/client';
import type { FlagSpec, ParsedArgs } from './args';
import { UsageError, boolFlag, parseBool } from './args';
import { formatJson } from './format';
import type { CliIo } from './io';

export const ADDRESS_FLAG: FlagSpec = {
  name: 'address',
  kind: 'string',
  valueName: 'addr',
  env: 'CSIPLUG_ADDR',
  dflt: DEFAULT_ADDRESS,
  help: "The agent's API, http:// or https://. NOMAD_ADDR is read when CSIPLUG_ADDR is not set (said on stderr).",
};
export const TOKEN_FLAG: FlagSpec = {
  name: 'token',
  kind: 'string',
  valueName: 'token',
  env: 'CSIPLUG_TOKEN',
  help: 'The ACL token, sent as X-Nomad-Token. NOMAD_TOKEN is read when CSIPLUG_TOKEN is not set, whichever address is used, as Nomad reads it.',
};
export const TIMEOUT_FLAG: FlagSpec = {
  name: 'timeout',
  kind: 'string',
  valueName: 'duration',
  dflt: '0 (no limit)',
  help: 'Give up when the agent has not answered within this long, e.g. 30s or 5m. The agent may still finish the operation. 0 waits as long as it takes.',
};
export const CA_CERT_FLAG: FlagSpec = {
  name: 'ca-cert',
  kind: 'string',
  valueName: 'path',
  env: 'CSIPLUG_CACERT',
  help: "For an https:// address: the PEM file of the CA that signed the agent's certificate, used instead of the system's CAs. NOMAD_CACERT is read when CSIPLUG_CACERT is not set.",
};
export const TLS_SKIP_VERIFY_FLAG: FlagSpec = {
  name: 'tls-skip-verify',
  kind: 'bool',
  env: 'CSIPLUG_SKIP_VERIFY',
  help: "For an https:// address: do not verify the agent's certificate. INSECURE: whoever can intercept the connection can read the token and answer in the agent's name. Use -ca-cert instead.",
};
export const JSON_FLAG: FlagSpec = {
  name: 'json',
  kind: 'bool',
  help: "Print csiplug's view of the answer as JSON instead of tables (the HTTP API itself answers in Nomad's shapes).",
};
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
  /** A repeatable flag's values, in the order given (none: empty). */
  listFlag(name: string): string[];
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
  return [
    ...(cmd.api ? [ADDRESS_FLAG, TOKEN_FLAG, TIMEOUT_FLAG, CA_CERT_FLAG, TLS_SKIP_VERIFY_FLAG] : []),
    ...(cmd.json ? [JSON_FLAG] : []),
    ...(cmd.flags ?? []),
  ];
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
      // Each of Nomad's variables is read on its own, as Nomad reads them, so a Nomad operator's
      // shell works as it is: the flag first, then csiplug's variable, then Nomad's.
      const fromNomad = stringFlag('address') === undefined && envOf('CSIPLUG_ADDR') === undefined && envOf('NOMAD_ADDR') !== undefined;
      const address = stringFlag('address') ?? envOf('CSIPLUG_ADDR') ?? envOf('NOMAD_ADDR');
      if (fromNomad) io.stderr.write(`(talking to NOMAD_ADDR=${address}: CSIPLUG_ADDR is not set)\n`);
      // A CA file set for Nomad (NOMAD_CACERT) is no reason to fail a plain-http call.
      const secure = /^https:/i.test(address ?? DEFAULT_ADDRESS);
      client ??= new ApiClient({
        address,
        token: stringFlag('token') ?? envOf('CSIPLUG_TOKEN') ?? envOf('NOMAD_TOKEN'),
        timeoutMs: timeoutFlag(stringFlag('timeout')),
        ...(secure ? caCertOption(io, stringFlag('ca-cert'), envOf) : {}),
        tlsSkipVerify: parsed.flags.has('tls-skip-verify') ? boolFlag(parsed, 'tls-skip-verify') : envBool(envOf, 'CSIPLUG_SKIP_VERIFY'),
      });
      return client;
    },
    flag: (name) => boolFlag(parsed, name),
    stringFlag,
    listFlag: (name) => {
      const v = parsed.flags.get(name);
      return Array.isArray(v) ? [...v] : [];
    },
    out: (text) => void io.stdout.write(text.endsWith('\n') || text === '' ? text : `${text}\n`),
    printJson: (value) => void io.stdout.write(formatJson(value)),
    readFile: (file) => readInput(io, file),
  };
}

/** -timeout as milliseconds; absent or 0 means no limit. */
function timeoutFlag(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  try {
    return parseDuration(text, '-timeout');
  } catch (err) {
    if (err instanceof ValidationError) throw new UsageError(`${err.message} (0 means no limit)`);
    throw err;
  }
}

/** The CA file from -ca-cert, else CSIPLUG_CACERT, else NOMAD_CACERT, read now so a bad path is named before any call. */
function caCertOption(io: CliIo, flag: string | undefined, envOf: (name: string) => string | undefined): { caCert?: Buffer } {
  const [from, file] =
    flag !== undefined
      ? ['-ca-cert', flag]
      : envOf('CSIPLUG_CACERT') !== undefined
        ? ['CSIPLUG_CACERT', envOf('CSIPLUG_CACERT')!]
        : ['NOMAD_CACERT', envOf('NOMAD_CACERT')];
  if (file === undefined) return {};
  try {
    return { caCert: fs.readFileSync(path.resolve(io.cwd ?? process.cwd(), file)) };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : (err as Error).message;
    throw new UsageError(`cannot read the CA certificate ${file} (from ${from}): ${why}`);
  }
}

/** A boolean environment variable, read as Go's strconv.ParseBool would. */
function envBool(envOf: (name: string) => string | undefined, name: string): boolean | undefined {
  const v = envOf(name);
  if (v === undefined) return undefined;
  try {
    return parseBool(name, v);
  } catch {
    throw new UsageError(`invalid boolean value "${v}" in ${name}: use true or false`);
  }
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
