// Which plugin a list of snapshots or of the plugin's own volumes goes to
// (`volume snapshot list`, `volume status -type csi -plugin`): the one named,
// else the only controller here that offers the list; several is a usage
// error asking for -plugin, none an error naming the controllers there are
// and what they lack — never an empty list, which would say they hold none.
import { ValidationError } from '@csiplug/core';
import type { PluginInfo } from '@csiplug/csimanager';
import { VolumeUnsupportedError } from '@csiplug/volumes';
import { NotFoundError } from './agent-errors';

export type ListedThing = 'snapshots' | 'volumes';

/** The plugin a list of `what` goes to, from the plugins the CSI manager has now. */
export function listingPlugin(
  named: string | undefined,
  plugins: readonly PluginInfo[],
  offers: (c: NonNullable<PluginInfo['controller']>) => boolean,
  what: ListedThing,
): string {
  if (named !== undefined) return named;
  const controllers = plugins.filter((p) => p.type === 'csi-controller');
  const able = [...new Set(controllers.filter((p) => p.controller && offers(p.controller)).map((p) => p.name))].sort();
  if (able.length > 1)
    throw new ValidationError(`more than one plugin lists its ${what} (${able.join(', ')}); name one with -plugin`, 'plugin_id');
  if (able.length === 1) return able[0]!;
  const names = [...new Set(controllers.map((p) => p.name))].sort();
  if (names.length === 0)
    throw new NotFoundError(
      `no controller plugin is registered on this node, so none can list its ${what}; run the plugin's controller or monolith job first`,
    );
  const capability = what === 'snapshots' ? 'LIST_SNAPSHOTS' : 'LIST_VOLUMES';
  if (names.length === 1)
    throw new VolumeUnsupportedError(
      '',
      names[0]!,
      `plugin "${names[0]}" does not list ${what}: its controller does not offer ${capability}`,
    );
  throw new VolumeUnsupportedError(
    '',
    '',
    `none of the plugins here (${names.map((n) => `"${n}"`).join(', ')}) lists ${what}: their controllers do not offer ${capability}`,
  );
}
