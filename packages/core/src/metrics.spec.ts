import { NullMetrics, defineMetric, recordSafely, secondsSince, type Metrics } from './metrics';

describe('defineMetric', () => {
  it('accepts a well-formed definition and freezes it', () => {
    const def = defineMetric({ name: 'csiplug_x_seconds', help: 'x', kind: 'histogram', labels: ['rpc', 'code'] });
    expect(Object.isFrozen(def)).toBe(true);
    expect(Object.isFrozen(def.labels)).toBe(true);
  });

  it('refuses names and labels Prometheus would refuse, and a counter not ending in _total', () => {
    expect(() => defineMetric({ name: 'csiplug-x', help: 'x', kind: 'histogram', labels: [] })).toThrow(/not a valid Prometheus name/);
    expect(() => defineMetric({ name: 'csiplug_x', help: 'x', kind: 'histogram', labels: ['bad-label'] })).toThrow(/label "bad-label"/);
    expect(() => defineMetric({ name: 'csiplug_x', help: 'x', kind: 'histogram', labels: ['__reserved'] })).toThrow(/label "__reserved"/);
    expect(() => defineMetric({ name: 'csiplug_x', help: 'x', kind: 'counter', labels: [] })).toThrow(/ends in _total/);
  });
});

describe('NullMetrics and secondsSince', () => {
  it('NullMetrics takes every call and keeps nothing', () => {
    const m: Metrics = new NullMetrics();
    const def = defineMetric({ name: 'csiplug_y_total', help: 'y', kind: 'counter', labels: ['a'] });
    expect(() => m.count(def, { a: '1' })).not.toThrow();
    expect(() => m.observe(def, 1, { a: '1' })).not.toThrow();
  });

  it('secondsSince turns milliseconds into seconds and never goes below zero (a clock that stepped back)', () => {
    expect(secondsSince(1_000, 3_500)).toBe(2.5);
    expect(secondsSince(5_000, 4_000)).toBe(0);
  });
});

describe('recordSafely', () => {
  it('swallows what a metrics implementation throws, so the measured work keeps its own outcome', () => {
    expect(() =>
      recordSafely(() => {
        throw new Error('clash');
      }),
    ).not.toThrow();
    let ran = false;
    recordSafely(() => (ran = true));
    expect(ran).toBe(true);
  });
});
