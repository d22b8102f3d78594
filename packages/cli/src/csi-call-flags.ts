// Nomad's per-call `-secret key=value` and `-parameter key=value` flags of
// `volume snapshot create|delete|list` and `volume delete` (repeatable, as in
// command/volume_snapshot_create.go): read into maps, each malformed pair a
// usage error in Nomad's words; a secret with a comma is refused (Nomad's
// header joins the pairs with commas). The values are never printed.
import { UsageError } from './args';
import type { FlagSpec } from './args';
import type { CommandContext } from './command';

export const SECRET_FLAG: FlagSpec = {
  name: 'secret',
  kind: 'list',
  valueName: 'key=value',
  help: "A secret for the plugin's call, as key=value; may be given more than once. Goes over the volume's own secret of the same key.",
};

export const PARAMETER_FLAG: FlagSpec = {
  name: 'parameter',
  kind: 'list',
  valueName: 'key=value',
  help: "A parameter for the plugin's snapshot call, as key=value; may be given more than once.",
};

/** The `-<flag> key=value` pairs given as a map; undefined when none were given. */
export function keyValueFlag(ctx: CommandContext, flag: 'secret' | 'parameter'): Record<string, string> | undefined {
  const given = ctx.listFlag(flag);
  if (given.length === 0) return undefined;
  const out: Record<string, string> = {};
  for (const pair of given) {
    const eq = pair.indexOf('=');
    // Nomad: "Secret must be in the format: -secret key=value" (the value itself is not repeated: it may be a secret).
    if (eq <= 0) throw new UsageError(`${flag === 'secret' ? 'Secret' : 'Parameter'} must be in the format: -${flag} key=value`);
    // Nomad's X-Nomad-CSI-Secrets header joins the pairs with commas: a comma in a secret would reach the plugin as another secret. Refused, never echoed.
    if (flag === 'secret' && pair.includes(','))
      throw new UsageError('a -secret key or value cannot hold a comma (the pairs are sent joined by commas); give the secret without one');
    out[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return out;
}
