// ModuleHost: registration and start run forward, stop in reverse; a failed
// start stops what had started; every stop runs; stop is idempotent.
import { container as rootContainer, type DependencyContainer } from 'tsyringe';
import { ValidationError } from './errors';
import { MemoryLogger } from './logger';
import { ILogger } from './tokens';
import {
  ModuleHost,
  ModuleHostStateError,
  ModuleStartError,
  ModuleStopError,
  withConfig,
  type ConfiguredModule,
  type Module,
} from './module';

/** A module that records each of its steps in `calls` and fails the steps named in `fail`. */
function recording(name: string, calls: string[], fail: { start?: boolean; stop?: boolean; asyncStart?: boolean } = {}): ConfiguredModule {
  return {
    name,
    register: () => {
      calls.push(`register ${name}`);
    },
    start: async () => {
      if (fail.asyncStart) await new Promise((resolve) => setImmediate(resolve));
      calls.push(`start ${name}`);
      if (fail.start) throw new Error(`${name} cannot start`);
    },
    stop: () => {
      calls.push(`stop ${name}`);
      if (fail.stop) throw new Error(`${name} cannot stop`);
    },
  };
}

describe('ModuleHost', () => {
  let container: DependencyContainer;
  let logger: MemoryLogger;
  let calls: string[];
  beforeEach(() => {
    container = rootContainer.createChildContainer();
    logger = new MemoryLogger();
    calls = [];
  });

  it('registers and starts forward, stops in reverse, and waits for each async start before the next', async () => {
    const host = new ModuleHost(
      container,
      [recording('a', calls, { asyncStart: true }), recording('b', calls), recording('c', calls)],
      logger,
    );
    expect(host.names).toEqual(['a', 'b', 'c']);
    host.register();
    expect(calls).toEqual(['register a', 'register b', 'register c']);
    await host.start();
    await host.stop();
    expect(calls.slice(3)).toEqual(['start a', 'start b', 'start c', 'stop c', 'stop b', 'stop a']);
  });

  it('passes each module its container and, through withConfig, its config', async () => {
    const seen: unknown[] = [];
    const configured: Module<{ dataDir: string }> = {
      name: 'configured',
      register: (c, config) => seen.push(c === container, config.dataDir),
      start: (c) => void seen.push(c === container),
      stop: (c) => void seen.push(c === container),
    };
    const host = new ModuleHost(container, [withConfig(configured, { dataDir: '/var/lib/x' })], logger);
    host.register();
    await host.start();
    await host.stop();
    expect(seen).toEqual([true, '/var/lib/x', true, true]);
  });

  it('a module with neither start nor stop is only registered', async () => {
    const host = new ModuleHost(
      container,
      [{ name: 'plain', register: () => void calls.push('register plain') }, recording('b', calls)],
      logger,
    );
    host.register();
    await host.start();
    await host.stop();
    expect(calls).toEqual(['register plain', 'register b', 'start b', 'stop b']);
  });

  it('a failed start stops the modules started before it, newest first, and names the module', async () => {
    const host = new ModuleHost(
      container,
      [recording('a', calls), recording('b', calls), recording('c', calls, { start: true }), recording('d', calls)],
      logger,
    );
    host.register();
    const err: unknown = await host.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ModuleStartError);
    expect(err).toMatchObject({ code: 'EMODULE_START', module: 'c', message: 'module "c" failed to start: c cannot start' });
    expect((err as Error).cause).toEqual(new Error('c cannot start'));
    // c's own start cleans up after itself; d never started.
    expect(calls.slice(4)).toEqual(['start a', 'start b', 'start c', 'stop b', 'stop a']);
    expect(logger.find('a module failed to start', 'error')[0]?.fields).toMatchObject({ module: 'c' });
    // The host is stopped: a later stop does nothing more.
    await host.stop();
    expect(calls.filter((c) => c.startsWith('stop'))).toEqual(['stop b', 'stop a']);
  });

  it('a stop that throws during a failed start is logged, and the start error is the one thrown', async () => {
    const host = new ModuleHost(
      container,
      [recording('a', calls), recording('b', calls, { stop: true }), recording('c', calls, { start: true })],
      logger,
    );
    host.register();
    await expect(host.start()).rejects.toMatchObject({ module: 'c' });
    expect(calls.filter((c) => c.startsWith('stop'))).toEqual(['stop b', 'stop a']);
    expect(logger.find('a module failed to stop', 'error').map((r) => r.fields.module)).toEqual(['b']);
  });

  it('every stop runs when one throws; the failure is logged with the module name and rethrown', async () => {
    const host = new ModuleHost(container, [recording('a', calls), recording('b', calls, { stop: true }), recording('c', calls)], logger);
    host.register();
    await host.start();
    const err: unknown = await host.stop().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(calls.filter((c) => c.startsWith('stop'))).toEqual(['stop c', 'stop b', 'stop a']);
    expect(err).toBeInstanceOf(ModuleStopError);
    expect(err).toMatchObject({ code: 'EMODULE_STOP', module: 'b', message: 'module "b" failed to stop: b cannot stop' });
    expect(logger.find('a module failed to stop', 'error').map((r) => r.fields.module)).toEqual(['b']);
  });

  it('several failed stops are thrown together, each named', async () => {
    const host = new ModuleHost(
      container,
      [recording('a', calls, { stop: true }), recording('b', calls), recording('c', calls, { stop: true })],
      logger,
    );
    host.register();
    await host.start();
    const err = (await host.stop().catch((e: unknown) => e)) as AggregateError;
    expect(err).toBeInstanceOf(AggregateError);
    expect(err.message).toBe('2 modules failed to stop: c, a');
    expect(err.errors.map((e: ModuleStopError) => e.module)).toEqual(['c', 'a']);
    expect(calls.filter((c) => c.startsWith('stop'))).toEqual(['stop c', 'stop b', 'stop a']);
  });

  it('stop is idempotent: the second call returns the same promise and stops nothing again', async () => {
    const host = new ModuleHost(container, [recording('a', calls), recording('b', calls)], logger);
    host.register();
    await host.start();
    const first = host.stop();
    const second = host.stop();
    expect(second).toBe(first);
    await first;
    await host.stop();
    expect(calls.filter((c) => c.startsWith('stop'))).toEqual(['stop b', 'stop a']);
  });

  it('stop before start stops nothing, and the host cannot start afterwards', async () => {
    const host = new ModuleHost(container, [recording('a', calls)], logger);
    host.register();
    await host.stop();
    expect(calls).toEqual(['register a']);
    await expect(host.start()).rejects.toThrow(
      'cannot start the modules: they are stopped; modules are registered, started and stopped in that order, each once',
    );
  });

  it('refuses steps out of order, and stop while starting', async () => {
    let release!: () => void;
    const slow: ConfiguredModule = {
      name: 'slow',
      register: () => undefined,
      start: () => new Promise<void>((resolve) => (release = resolve)),
    };
    const host = new ModuleHost(container, [slow], logger);
    await expect(host.start()).rejects.toBeInstanceOf(ModuleHostStateError);
    host.register();
    expect(() => host.register()).toThrow('cannot register the modules: they are registered but not started');
    const starting = host.start();
    await expect(host.stop()).rejects.toThrow('asked to stop while its modules are still starting');
    release();
    await starting;
    await host.stop();
  });

  it('a registration error is the module’s own, rethrown as is', () => {
    const bad: ConfiguredModule = {
      name: 'bad',
      register: () => {
        throw new ValidationError('bad.setting: must be positive', 'setting');
      },
    };
    const host = new ModuleHost(container, [recording('a', calls), bad, recording('c', calls)], logger);
    expect(() => host.register()).toThrow(ValidationError);
    expect(calls).toEqual(['register a']);
  });

  it('without a logger of its own, it logs to the container’s ILogger', async () => {
    container.register(ILogger, { useValue: logger });
    const host = new ModuleHost(container, [recording('a', calls, { stop: true })]);
    host.register();
    await host.start();
    await expect(host.stop()).rejects.toBeInstanceOf(ModuleStopError);
    expect(logger.find('a module failed to stop', 'error')[0]?.fields).toMatchObject({ component: 'modules', module: 'a' });
  });

  it('a module listed twice is refused', () => {
    expect(() => new ModuleHost(container, [recording('a', calls), recording('a', calls)], logger)).toThrow(
      'module "a" is in the list twice',
    );
  });
});
