// Which plugin a snapshot or volume list goes to, and each refusal's words:
// the plugin named; the only controller that lists; several (name one);
// none that lists, one controller or several (naming them and what they
// lack, one sentence without a double negative); no controller at all.
import { ValidationError } from '@csiplug/core';
import type { PluginInfo } from '@csiplug/csimanager';
import { fakePluginInfo } from '@csiplug/csimanager/testing';
import { VolumeUnsupportedError } from '@csiplug/volumes';
import { NotFoundError } from './agent-errors';
import { listingPlugin } from './listing-plugin';

function controller(name: string, listSnapshots: boolean): PluginInfo {
  const base = fakePluginInfo('csi-controller', name);
  return { ...base, controller: { ...base.controller!, capabilities: { ...base.controller!.capabilities, listSnapshots } } };
}

const snapshots = (named: string | undefined, plugins: PluginInfo[]) =>
  listingPlugin(named, plugins, (c) => c.capabilities.listSnapshots, 'snapshots');

describe('listingPlugin', () => {
  test('the plugin named, else the only controller that lists; several is a usage error asking for -plugin', () => {
    expect(snapshots('named', [])).toBe('named');
    expect(snapshots(undefined, [controller('a', false), controller('b', true), fakePluginInfo('csi-node', 'c')])).toBe('b');
    expect(() => snapshots(undefined, [controller('b', true), controller('a', true)])).toThrow(ValidationError);
    expect(() => snapshots(undefined, [controller('b', true), controller('a', true)])).toThrow(
      'more than one plugin lists its snapshots (a, b); name one with -plugin',
    );
  });

  test('none that lists: the one controller, or every controller, named with what it lacks', () => {
    expect(() => snapshots(undefined, [controller('a', false)])).toThrow(
      new VolumeUnsupportedError('', 'a', 'plugin "a" does not list snapshots: its controller does not offer LIST_SNAPSHOTS'),
    );
    const several = () => snapshots(undefined, [controller('b', false), controller('a', false), controller('a', false)]);
    expect(several).toThrow(VolumeUnsupportedError);
    expect(several).toThrow('none of the plugins here ("a", "b") lists snapshots: their controllers do not offer LIST_SNAPSHOTS');
  });

  test('no controller at all (node plugins only): not found, saying to run a controller', () => {
    const none = () => snapshots(undefined, [fakePluginInfo('csi-node', 'a')]);
    expect(none).toThrow(NotFoundError);
    expect(none).toThrow(
      "no controller plugin is registered on this node, so none can list its snapshots; run the plugin's controller or monolith job first",
    );
  });
});
