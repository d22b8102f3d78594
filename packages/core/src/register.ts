// registerCore binds the shared defaults: a real clock, a pino logger,
// Math.random, the default timeout policy, a heartbeat strategy and
// metrics that record nothing until an implementation is bound.
// coreModule is the same registration as a Module (nothing to start or stop).
import { type DependencyContainer } from 'tsyringe';
import { type Clock, RealClock } from './clock';
import { bindDefault } from './di';
import { ValidationError } from './errors';
import { BackoffHeartbeatStrategy, FixedHeartbeatStrategy, type HeartbeatSettings } from './heartbeat';
import { type Logger, PinoLogger } from './logger';
import { type Metrics, NullMetrics } from './metrics';
import type { Module } from './module';
import { declareTokenOwner } from './token-owners';
import { MathRandom, type Random } from './random';
import { DefaultTimeoutPolicy, type TimeoutSettings } from './timeout-policy';
import { IClock, IHeartbeatStrategy, ILogger, IMetrics, IRandom, ITimeoutPolicy } from './tokens';

export type HeartbeatStrategyName = 'fixed' | 'backoff';

export interface CoreOptions {
  clock?: Clock;
  logger?: Logger;
  random?: Random;
  /** Where the packages record their figures; NullMetrics (nothing recorded) by default. */
  metrics?: Metrics;
  timeouts?: Partial<TimeoutSettings>;
  heartbeat?: { strategy?: HeartbeatStrategyName } & Partial<HeartbeatSettings>;
}

export function registerCore(container: DependencyContainer, options: CoreOptions = {}): void {
  bindDefault(container, IClock, { useValue: options.clock ?? new RealClock() });
  bindDefault(container, ILogger, { useValue: options.logger ?? new PinoLogger() });
  bindDefault(container, IRandom, { useValue: options.random ?? new MathRandom() });
  bindDefault(container, IMetrics, { useValue: options.metrics ?? new NullMetrics() });
  bindDefault(container, ITimeoutPolicy, { useValue: new DefaultTimeoutPolicy(options.timeouts) });
  const { strategy = 'backoff', ...settings } = options.heartbeat ?? {};
  if (strategy !== 'fixed' && strategy !== 'backoff') {
    throw new ValidationError(`heartbeat.strategy: unknown strategy "${String(strategy)}"; known: fixed, backoff`, 'strategy');
  }
  bindDefault(container, IHeartbeatStrategy, {
    useFactory: (c) => {
      const random = c.resolve<Random>(IRandom);
      return strategy === 'fixed' ? new FixedHeartbeatStrategy(settings, random) : new BackoffHeartbeatStrategy(settings, random);
    },
  });
}

/** Core as a module: registration only (the clock, logger and policies own nothing to stop). */
export const coreModule: Module<CoreOptions> = {
  name: 'core',
  register: (container, config) => registerCore(container, config),
};

declareTokenOwner({ name: 'core', exportName: 'coreModule', packageName: '@csiplug/core' }, [
  IClock,
  ILogger,
  IRandom,
  IMetrics,
  ITimeoutPolicy,
  IHeartbeatStrategy,
]);
