// registerCore binds the shared defaults: a real clock, a pino logger,
// Math.random, the default timeout policy and a heartbeat strategy.
import { DependencyContainer } from 'tsyringe';
import { Clock, RealClock } from './clock';
import { bindDefault } from './di';
import { ValidationError } from './errors';
import { BackoffHeartbeatStrategy, FixedHeartbeatStrategy, HeartbeatSettings } from './heartbeat';
import { Logger, PinoLogger } from './logger';
import { MathRandom, Random } from './random';
import { DefaultTimeoutPolicy, TimeoutSettings } from './timeout-policy';
import { IClock, IHeartbeatStrategy, ILogger, IRandom, ITimeoutPolicy } from './tokens';

export type HeartbeatStrategyName = 'fixed' | 'backoff';

export interface CoreOptions {
  clock?: Clock;
  logger?: Logger;
  random?: Random;
  timeouts?: Partial<TimeoutSettings>;
  heartbeat?: { strategy?: HeartbeatStrategyName } & Partial<HeartbeatSettings>;
}

export function registerCore(container: DependencyContainer, options: CoreOptions = {}): void {
  bindDefault(container, IClock, { useValue: options.clock ?? new RealClock() });
  bindDefault(container, ILogger, { useValue: options.logger ?? new PinoLogger() });
  bindDefault(container, IRandom, { useValue: options.random ?? new MathRandom() });
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
