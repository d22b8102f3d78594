import { IClock, ILogger, MemoryLogger, ValidationError } from '@csiplug/core';
import { FakeClock } from '@csiplug/core/testing';
import * as fs from 'fs';
import * as path from 'path';
import { container as root } from 'tsyringe';
import type { ClientStateDB } from './client-state';
import { registerState, stateModule } from './register';
import { IAllocStateStore, IClientStateDB, IRegistryStateStore, IVolumeStateStore } from './tokens';
import { tempDir } from '../test/support/backends';

describe('registerState', () => {
  test('binds the in-memory store', () => {
    const c = root.createChildContainer();
    registerState(c, { backend: 'memory' });
    const state = c.resolve<ClientStateDB>(IClientStateDB);
    expect(state.path).toBeUndefined();
    expect(c.resolve<ClientStateDB>(IClientStateDB)).toBe(state);
    state.putVolume('v', { id: 'v' });
    expect(state.getVolume('v')).toEqual({ id: 'v' });
    state.dispose();
  });

  test('binds the SQLite store at <dataDir>/state.db with the container clock and logger', () => {
    const dir = tempDir();
    try {
      const c = root.createChildContainer();
      c.register(IClock, { useValue: new FakeClock(Date.UTC(2030, 0, 1)) });
      const logger = new MemoryLogger();
      c.register(ILogger, { useValue: logger });
      registerState(c, { backend: 'sqlite', dataDir: dir });
      const state = c.resolve<ClientStateDB>(IClientStateDB);
      expect(state.path).toBe(path.join(dir, 'state.db'));
      expect(fs.existsSync(path.join(dir, 'state.db'))).toBe(true);
      state.dispose();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('binds the narrow stores to the same instance', () => {
    const c = root.createChildContainer();
    registerState(c, { backend: 'memory' });
    const state = c.resolve<ClientStateDB>(IClientStateDB);
    try {
      expect(c.resolve(IRegistryStateStore)).toBe(state);
      expect(c.resolve(IAllocStateStore)).toBe(state);
      expect(c.resolve(IVolumeStateStore)).toBe(state);
    } finally {
      state.dispose();
    }
  });

  test('leaves a deployment’s own binding alone, and the narrow stores follow it', () => {
    const c = root.createChildContainer();
    const mine = { mine: true } as unknown as ClientStateDB;
    c.register(IClientStateDB, { useValue: mine });
    const myVolumes = { volumes: true };
    c.register(IVolumeStateStore, { useValue: myVolumes });
    registerState(c, { backend: 'memory' });
    expect(c.resolve(IClientStateDB)).toBe(mine);
    expect(c.resolve(IRegistryStateStore)).toBe(mine);
    expect(c.resolve(IAllocStateStore)).toBe(mine);
    expect(c.resolve(IVolumeStateStore)).toBe(myVolumes);
  });

  test('rejects an unknown backend or a missing data dir', () => {
    const c = root.createChildContainer();
    expect(() => registerState(c, { backend: 'bolt' as never })).toThrow(ValidationError);
    expect(() => registerState(c, { backend: 'sqlite' })).toThrow(/needs a data dir/);
  });
});

describe('stateModule', () => {
  test('registering opens nothing; start opens the state file; stop disposes it', async () => {
    const dir = tempDir();
    try {
      const c = root.createChildContainer();
      c.register(ILogger, { useValue: new MemoryLogger() });
      stateModule.register(c, { backend: 'sqlite', dataDir: dir });
      expect(fs.existsSync(path.join(dir, 'state.db'))).toBe(false);
      await stateModule.start!(c);
      expect(fs.existsSync(path.join(dir, 'state.db'))).toBe(true);
      const state = c.resolve<ClientStateDB>(IClientStateDB);
      state.putVolume('v', { id: 'v' });
      await stateModule.stop!(c);
      expect(() => state.getVolume('v')).toThrow(expect.objectContaining({ code: 'ErrDatabaseNotOpen' }));
      // Stopping again is harmless.
      await stateModule.stop!(c);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
