// registerCsi binds the CSI client factory. It needs the core tokens
// (ITimeoutPolicy, IClock, IRandom, ILogger; IMetrics when bound) bound first —
// registerCore does that.
// csiModule is the same registration as a Module: the factory owns nothing
// (each client belongs to whoever asked for it), so there is nothing to stop.
import type { DependencyContainer } from 'tsyringe';
import {
  bindDefault,
  type Clock,
  declareTokenOwner,
  IClock,
  ILogger,
  IMetrics,
  IRandom,
  ITimeoutPolicy,
  type Logger,
  type Metrics,
  type Module,
  NullMetrics,
  type Random,
  type TimeoutPolicy,
} from '@csiplug/core';
import { type CSIClient, type CSIClientOptions, GrpcCSIClient } from './client';
import { type RetryOptions } from './retry';
import { type CSIClientFactory, ICSIClientFactory } from './tokens';

export interface CsiOptions {
  /** Retry settings applied to every client the factory makes. */
  retry?: Partial<RetryOptions>;
}

export class DefaultCSIClientFactory implements CSIClientFactory {
  constructor(
    private readonly timeouts: TimeoutPolicy,
    private readonly clock: Clock,
    private readonly random: Random,
    private readonly logger: Logger,
    private readonly defaults: CSIClientOptions = {},
    private readonly metrics: Metrics = new NullMetrics(),
  ) {}

  createClient(endpoint: string, options: CSIClientOptions = {}): CSIClient {
    return new GrpcCSIClient(
      endpoint,
      { timeouts: this.timeouts, clock: this.clock, random: this.random, logger: this.logger, metrics: this.metrics },
      { ...this.defaults, ...options, retry: { ...this.defaults.retry, ...options.retry } },
    );
  }
}

export function registerCsi(container: DependencyContainer, options: CsiOptions = {}): void {
  bindDefault(container, ICSIClientFactory, {
    useFactory: (c) =>
      new DefaultCSIClientFactory(
        c.resolve<TimeoutPolicy>(ITimeoutPolicy),
        c.resolve<Clock>(IClock),
        c.resolve<Random>(IRandom),
        c.resolve<Logger>(ILogger),
        { retry: options.retry },
        c.isRegistered(IMetrics, true) ? c.resolve<Metrics>(IMetrics) : new NullMetrics(),
      ),
  });
}

/** The CSI client factory as a module (registration only). */
export const csiModule: Module<CsiOptions> = {
  name: 'csi',
  register: (container, config) => registerCsi(container, config),
};

declareTokenOwner({ name: 'csi', exportName: 'csiModule', packageName: '@csiplug/csi' }, [ICSIClientFactory]);
