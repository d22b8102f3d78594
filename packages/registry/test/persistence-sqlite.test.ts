// Persistence over a real SQLite file through the default store
// (StateRegistryStore over the real ClientStateDB), closed and reopened
// between "agent runs".
import { DefaultTimeoutPolicy, MemoryLogger } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DynamicPluginRegistry, MalformedRegistryStateError, PluginDispenserTable, RegistryRestoreError, StateRegistryStore } from '../src';
import { plugin } from './harness';
import { openClientState, type ClientStateDB } from '@csiplug/state';

describe('persistence over a SQLite state file', () => {
  let dir: string;
  let file: string;
  const opened: ClientStateDB[] = [];

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-registry-'));
    file = path.join(dir, 'state.db');
  });
  afterEach(() => {
    for (const o of opened.splice(0)) o.dispose();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** One agent run: open the file, build a registry over it. */
  function agentRun() {
    const s = openClientState({ path: file });
    opened.push(s);
    const registry = new DynamicPluginRegistry(
      new StateRegistryStore(s),
      new FakeClock(),
      new MemoryLogger(),
      new DefaultTimeoutPolicy(),
      new PluginDispenserTable(),
      {},
    );
    return {
      registry,
      stop() {
        registry.dispose();
        opened.splice(opened.indexOf(s), 1);
        s.dispose();
      },
    };
  }

  it('keeps every list, in order, across a close and reopen', () => {
    const run1 = agentRun();
    for (let i = 0; i < 4; i++) run1.registry.register(plugin(i, { options: { mountPoint: `/m${i}` } }));
    run1.registry.register(plugin(0, { type: 'csi-controller' }));
    run1.registry.register(plugin(1, { type: 'csi-controller' }));
    run1.registry.deregister('csi-node', 'my-plugin', 'alloc-2');
    run1.stop();

    const run2 = agentRun();
    expect(run2.registry.registrations('csi-node', 'my-plugin').map((p) => [p.allocId, p.options['mountPoint'], p.restored])).toEqual([
      ['alloc-3', '/m3', true],
      ['alloc-1', '/m1', true],
      ['alloc-0', '/m0', true],
    ]);
    expect(run2.registry.registrations('csi-controller', 'my-plugin').map((p) => p.allocId)).toEqual(['alloc-1', 'alloc-0']);
    run2.stop();
  });

  it('a plugin named like an object property ("__proto__") is stored and restored like any other', () => {
    const run1 = agentRun();
    run1.registry.register(plugin(0, { name: '__proto__' }));
    run1.registry.register(plugin(1, { name: 'constructor' }));
    run1.stop();
    const run2 = agentRun();
    expect(run2.registry.get('csi-node', '__proto__')).toMatchObject({ allocId: 'alloc-0', restored: true });
    expect(run2.registry.get('csi-node', 'constructor')).toMatchObject({ allocId: 'alloc-1', restored: true });
    run2.stop();
  });

  it('refuses to start over a stored document that is not a registry document, naming where it is', () => {
    const s = openClientState({ path: file });
    s.putRegistryState({ nope: true });
    s.dispose();
    const err = (() => {
      try {
        agentRun();
      } catch (e) {
        return e as Error;
      }
      throw new Error('the registry started over a malformed document');
    })();
    expect(err).toBeInstanceOf(RegistryRestoreError);
    expect(err.message).toContain('the stored registry state in the client state (dynamicplugins/registry_state) has no "plugins" object');
    expect(err.cause as Error).toBeInstanceOf(MalformedRegistryStateError);
  });

  it('a bare client state, passed where a store is asked for, persists and restores too, and a malformed document is still refused', () => {
    const s = openClientState({ path: file });
    opened.push(s);
    const first = new DynamicPluginRegistry(
      s,
      new FakeClock(),
      new MemoryLogger(),
      new DefaultTimeoutPolicy(),
      new PluginDispenserTable(),
      {},
    );
    first.register(plugin(0));
    first.dispose();
    const second = new DynamicPluginRegistry(
      s,
      new FakeClock(),
      new MemoryLogger(),
      new DefaultTimeoutPolicy(),
      new PluginDispenserTable(),
      {},
    );
    expect(second.get('csi-node', 'my-plugin')).toMatchObject({ allocId: 'alloc-0', restored: true });
    second.dispose();
    s.putRegistryState({ plugins: null });
    expect(
      () => new DynamicPluginRegistry(s, new FakeClock(), new MemoryLogger(), new DefaultTimeoutPolicy(), new PluginDispenserTable(), {}),
    ).toThrow(
      'could not restore the plugin registry from the client state: the stored registry state in the registry store has no "plugins" object',
    );
  });

  it('restart race: alloc-1 stays active when alloc-0 re-registers first after a restart', () => {
    const run1 = agentRun();
    run1.registry.register(plugin(0));
    run1.registry.register(plugin(1));
    run1.stop();

    const run2 = agentRun();
    run2.registry.register(plugin(0));
    expect(run2.registry.get('csi-node', 'my-plugin')).toMatchObject({ allocId: 'alloc-1', restored: true });
    run2.registry.register(plugin(2)); // a replacement
    run2.stop();

    const run3 = agentRun();
    expect(run3.registry.registrations('csi-node', 'my-plugin').map((p) => p.allocId)).toEqual(['alloc-2', 'alloc-1', 'alloc-0']);
    run3.stop();
  });
});
