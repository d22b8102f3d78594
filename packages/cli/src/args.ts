// Command-line flags the way Nomad's CLI (Go's flag package) reads them —
// `-flag value`, `-flag=value`, booleans as `-json` or `-json=false` — with
// `--flag` accepted too. Unlike Go's, flags may follow the positionals
// (`volume deregister ID -force`); `--` ends the flags.
import { CsiplugError } from '@csiplug/core';
import { wrap } from './format';

export interface FlagSpec {
  name: string;
  /** list: a string flag that may be given again, each value kept (Nomad's `-secret k=v -secret k2=v2`). */
  kind: 'bool' | 'string' | 'list';
  /** Shown in help. */
  help: string;
  /** The value's placeholder in help, e.g. ADDR. */
  valueName?: string;
  /** Environment variable the flag overrides, e.g. CSIPLUG_ADDR (shown in help). */
  env?: string;
  /** The default, shown in help. */
  dflt?: string;
}

export interface ParsedArgs {
  /** Values of the flags given (bools true/false, strings as given, lists in the order given). */
  flags: Map<string, string | boolean | string[]>;
  positionals: string[];
  /** -h, -help or --help was given. */
  help: boolean;
}

/** A mistake in how the command was called: the CLI prints usage and exits 1. */
export class UsageError extends CsiplugError {
  constructor(message: string) {
    super('EUSAGE', message);
  }
}

const HELP = new Set(['h', 'help']);

/** Go's strconv.ParseBool. */
export function parseBool(name: string, value: string): boolean {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false;
  throw new UsageError(`invalid boolean value "${value}" for -${name}: use true or false`);
}

export function parseArgs(argv: readonly string[], specs: readonly FlagSpec[]): ParsedArgs {
  const byName = new Map(specs.map((s) => [s.name, s]));
  const flags = new Map<string, string | boolean | string[]>();
  const positionals: string[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const body = arg.startsWith('--') ? arg.slice(2) : arg.slice(1);
    const eq = body.indexOf('=');
    const name = eq >= 0 ? body.slice(0, eq) : body;
    const inline = eq >= 0 ? body.slice(eq + 1) : undefined;
    if (name === '' || name.startsWith('-')) throw new UsageError(`bad flag syntax: ${arg}`);
    if (HELP.has(name) && !byName.has(name)) {
      help = true;
      continue;
    }
    const spec = byName.get(name);
    if (!spec) throw new UsageError(`flag provided but not defined: -${name}`);
    if (spec.kind === 'bool') {
      flags.set(name, inline === undefined ? true : parseBool(name, inline));
      continue;
    }
    if (inline === undefined && i + 1 >= argv.length) throw new UsageError(`flag needs an argument: -${name}`);
    const value = inline ?? argv[++i]!;
    if (spec.kind === 'list') {
      const seen = flags.get(name);
      flags.set(name, [...(Array.isArray(seen) ? seen : []), value]);
    } else flags.set(name, value);
  }
  return { flags, positionals, help };
}

export function boolFlag(parsed: ParsedArgs, name: string): boolean {
  return parsed.flags.get(name) === true;
}

/** The options part of a usage text: one line per flag. */
export function formatFlags(specs: readonly FlagSpec[]): string {
  const lines = specs.map((s) => {
    const head = `  -${s.name}${s.kind === 'bool' ? '' : `=<${s.valueName ?? 'value'}>`}`;
    const env = s.env ? ` Overrides the ${s.env} environment variable if set.` : '';
    const dflt = s.dflt ? ` Default = ${s.dflt}` : '';
    return `${head}\n${wrap(`${s.help}${env}${dflt}`, 76, '    ')}`;
  });
  return lines.join('\n\n');
}
