import { container as root } from 'tsyringe';
import { FakeClock } from './testing/fake-clock';
import { DuplicateBindingError, bind, bindDefault } from './di';
import { ValidationError } from './errors';
import { BackoffHeartbeatStrategy, FixedHeartbeatStrategy } from './heartbeat';
import { MemoryLogger } from './logger';
import { SeededRandom } from './random';
import { registerCore } from './register';
import { DefaultTimeoutPolicy, doublingBackoff } from './timeout-policy';
import { IClock, IHeartbeatStrategy, ILogger, ITimeoutPolicy } from './tokens';

describe('DefaultTimeoutPolicy', () => {
  it('carries the design defaults', () => {
    const p = new DefaultTimeoutPolicy();
    expect(p.pluginWait('prerun')).toBe(60_000);
    expect(p.pluginWait('restore')).toBe(300_000);
    expect(p.pluginWait('postrun')).toBe(60_000);
    expect(p.pluginHealth()).toBe(30_000);
    expect(p.probe()).toBe(5_000);
    expect(p.csiCall()).toBe(120_000);
    expect([1, 2, 3, 7, 8].map((a) => p.claimBackoff(a))).toEqual([1000, 2000, 4000, 60_000, 60_000]);
    expect(p.claimRetryLimit()).toBe(86_400_000);
  });

  it('takes overrides and refuses unknown or bad ones', () => {
    expect(new DefaultTimeoutPolicy({ pluginWaitRestore: 10 }).pluginWait('restore')).toBe(10);
    expect(() => new DefaultTimeoutPolicy({ nope: 1 } as never)).toThrow(/unknown setting "nope"/);
    expect(() => new DefaultTimeoutPolicy({ probe: -1 })).toThrow(ValidationError);
    expect(() => new DefaultTimeoutPolicy().pluginWait('later' as never)).toThrow(/unknown plugin wait phase/);
  });

  it('doublingBackoff caps and treats attempts below 1 as the first', () => {
    expect(doublingBackoff(0, 10, 100)).toBe(10);
    expect(doublingBackoff(1000, 10, 100)).toBe(100);
  });
});

describe('heartbeat strategies', () => {
  it('backoff probes at once, then fast, doubling to the cap', () => {
    const s = new BackoffHeartbeatStrategy({ jitter: 0 });
    expect([0, 1, 2, 3, 4, 20].map((a) => s.startupProbeDelay(a))).toEqual([0, 5, 10, 20, 40, 5000]);
    expect(s.probeInterval()).toBe(30_000);
    expect(s.fingerprintInterval()).toBe(30_000);
  });

  it('jitter stays within its band', () => {
    const s = new BackoffHeartbeatStrategy({ jitter: 0.2 }, new SeededRandom(7));
    for (let i = 0; i < 200; i++) {
      const d = s.probeInterval();
      expect(d).toBeGreaterThanOrEqual(27_000);
      expect(d).toBeLessThanOrEqual(33_000);
    }
  });

  it('fixed probes on one period', () => {
    const s = new FixedHeartbeatStrategy({ startupMax: 5000 });
    expect([0, 1, 2].map((a) => s.startupProbeDelay(a))).toEqual([0, 5000, 5000]);
  });

  it('refuses bad settings', () => {
    expect(() => new BackoffHeartbeatStrategy({ jitter: 2 })).toThrow(/jitter/);
    expect(() => new FixedHeartbeatStrategy({ interval: -5 })).toThrow(/heartbeat.interval/);
  });
});

describe('registerCore and binding', () => {
  it('binds defaults, keeps what a deployment bound first', () => {
    const c = root.createChildContainer();
    const clock = new FakeClock();
    const logger = new MemoryLogger();
    bind(c, ILogger, { useValue: logger });
    registerCore(c, { clock, timeouts: { probe: 100 }, heartbeat: { strategy: 'fixed' } });
    expect(c.resolve(IClock)).toBe(clock);
    expect(c.resolve(ILogger)).toBe(logger);
    expect(c.resolve<DefaultTimeoutPolicy>(ITimeoutPolicy).probe()).toBe(100);
    expect(c.resolve(IHeartbeatStrategy)).toBeInstanceOf(FixedHeartbeatStrategy);
    expect(c.resolve(IHeartbeatStrategy)).toBe(c.resolve(IHeartbeatStrategy));
  });

  it('binding a token twice is an error; bindDefault yields', () => {
    const c = root.createChildContainer();
    bind(c, IClock, { useValue: new FakeClock() });
    expect(() => bind(c, IClock, { useValue: new FakeClock() })).toThrow(DuplicateBindingError);
    expect(bindDefault(c, IClock, { useValue: new FakeClock() })).toBe(false);
  });

  it('refuses an unknown heartbeat strategy at registration', () => {
    expect(() => registerCore(root.createChildContainer(), { heartbeat: { strategy: 'wild' as never } })).toThrow(
      /unknown strategy "wild"/,
    );
  });
});
