// The figures csiplug's packages record: a contract with two verbs (count,
// observe) over metric definitions each package declares beside the code
// that records them. The agent binds a prom-client implementation
// (@csiplug/agent's PromMetrics, served at /v1/metrics); the default records
// nothing, so a library user who wants no metrics pays for none.
//
// Gauges (how many plugins are healthy, how many claims exist) are not
// recorded here: they are read from the state that owns them when the
// figures are collected, so they can never drift from it.

/** A counter (only goes up) or a histogram (a distribution of observed values). */
export type MetricKind = 'counter' | 'histogram';

/** One metric: its Prometheus name, what it means, its kind and its label names. */
export interface MetricDef<L extends string = string> {
  /** `csiplug_<area>_<what>[_unit]`, e.g. `csiplug_csi_call_seconds`. */
  readonly name: string;
  readonly help: string;
  readonly kind: MetricKind;
  readonly labels: readonly L[];
  /** A histogram's upper bounds; a default suited to seconds when absent. */
  readonly buckets?: readonly number[];
}

/** A value for every label the definition names. */
export type MetricLabels<L extends string> = Readonly<Record<L, string>>;

export interface Metrics {
  /** Adds `by` (default 1) to a counter. */
  count<L extends string>(def: MetricDef<L>, labels: MetricLabels<L>, by?: number): void;
  /** Records one value of a histogram (a duration in seconds, a size). */
  observe<L extends string>(def: MetricDef<L>, value: number, labels: MetricLabels<L>): void;
}

/** Declares a metric; a name that breaks Prometheus's rules is refused where it is declared. */
export function defineMetric<L extends string>(def: MetricDef<L>): MetricDef<L> {
  if (!/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(def.name)) throw new Error(`metric name "${def.name}" is not a valid Prometheus name`);
  for (const l of def.labels)
    if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(l) || l.startsWith('__'))
      throw new Error(`metric ${def.name}: label "${l}" is not a valid Prometheus label name`);
  if (def.kind === 'counter' && !def.name.endsWith('_total')) throw new Error(`metric ${def.name}: a counter's name ends in _total`);
  return Object.freeze({ ...def, labels: Object.freeze([...def.labels]) });
}

/** Records nothing: the default where no one asked for metrics. */
export class NullMetrics implements Metrics {
  count(): void {
    // Nothing is collected without a metrics implementation bound.
  }
  observe(): void {
    // As count().
  }
}

/**
 * Records through `metrics` without ever changing the outcome of the work it
 * measures: a figure is worth less than the call it describes, so a
 * Metrics implementation that throws (a clash of definitions, an
 * embedder's bug) loses that one figure and nothing else.
 */
export function recordSafely(record: () => void): void {
  try {
    record();
  } catch {
    // The figure is lost; the measured work's own result stands.
  }
}

/** Seconds between two readings of a millisecond clock, for a histogram of durations. */
export function secondsSince(startMs: number, nowMs: number): number {
  return Math.max(0, nowMs - startMs) / 1000;
}
