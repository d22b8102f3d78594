// The agent's metrics, through prom-client: served at /v1/metrics as JSON
// and, with ?format=prometheus, in Prometheus's text format.
//
// Three kinds of figures, each from its owner:
//   - what the packages record as it happens (CSI call latency, plugin
//     waits, volume steps: @csiplug/core's Metrics contract, bound to
//     PromMetrics by the agent);
//   - counts read from the agent's own state when the figures are collected
//     (plugins and their health, registry entries, volumes and claims,
//     allocs, pending unmounts), so a gauge can never drift from the state
//     it describes;
//   - the process itself (CPU, RSS, heap, event-loop lag), from
//     prom-client's default collectors, made once per process and shared by
//     every agent in it (a test process starts many).
import { defineMetric, type MetricDef, type MetricLabels, type Metrics } from '@csiplug/core';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type Metric } from 'prom-client';
import type { AgentEvent, AgentService } from '@csiplug/api';

/** Every task restart the agent made, by job and task (a `Restarting` event). */
export const TASK_RESTARTS_TOTAL = defineMetric({
  name: 'csiplug_task_restarts_total',
  help: 'Task restarts the agent made after a task exited, by job and task',
  kind: 'counter',
  labels: ['job', 'task'],
});

/** Every event of the agent's event stream, by topic and type. */
export const EVENTS_TOTAL = defineMetric({
  name: 'csiplug_events_total',
  help: 'Events of the agent event stream (/v1/event/stream), by topic and type',
  kind: 'counter',
  labels: ['topic', 'type'],
});

/** Gauges whose reading failed (and were left out of that scrape), by gauge. */
export const COLLECT_ERRORS_TOTAL = defineMetric({
  name: 'csiplug_metrics_collect_errors_total',
  help: 'Scrapes in which reading a gauge from the agent state failed (the gauge was left out), by gauge',
  kind: 'counter',
  labels: ['gauge'],
});

/** The agent's state the collect-time gauges read. */
export interface MetricsState {
  service: Pick<AgentService, 'listPlugins' | 'listVolumes' | 'listAllocs'>;
  /** Registered plugin entries by registry type (csi-node, csi-controller). */
  registryEntries(): Record<string, number>;
  /** Volume mounts whose unmount is still to be done (retried, or waiting for the plugin). */
  pendingUnmounts(): number;
  /** The live mounts, each with its plugin and the state of its last check (as `volume status` shows it). */
  liveMounts(): Iterable<{ pluginId: string; state: string }>;
}

let processRegistry: Registry | undefined;

/** The process's own figures (process_*, nodejs_*): one set of collectors per process. */
function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

const DEFAULT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** @csiplug/core's Metrics over a prom-client registry of this agent's own. */
export class PromMetrics implements Metrics {
  readonly registry = new Registry();
  private readonly made = new Map<string, { def: MetricDef; metric: Counter | Histogram }>();
  /** Once the agent is gone its state is closed: the gauges read nothing instead of failing every scrape. */
  private retired = false;

  /** Makes each metric now, so it is listed (with no samples) before anything is recorded. */
  declare(...defs: MetricDef[]): void {
    for (const def of defs) this.metricFor(def);
  }

  count<L extends string>(def: MetricDef<L>, labels: MetricLabels<L>, by = 1): void {
    if (def.kind !== 'counter')
      throw new Error(
        `metric ${def.name} is a ${def.kind}, not a counter: it takes measured values, not counts (a fault in the agent: report it)`,
      );
    (this.metricFor(def) as Counter).inc(labels as Record<string, string>, by);
  }

  observe<L extends string>(def: MetricDef<L>, value: number, labels: MetricLabels<L>): void {
    if (def.kind !== 'histogram')
      throw new Error(
        `metric ${def.name} is a ${def.kind}, not a histogram: it takes counts, not measured values (a fault in the agent: report it)`,
      );
    (this.metricFor(def) as Histogram).observe(labels as Record<string, string>, value);
  }

  /**
   * Adds a gauge whose values are read from state when the figures are
   * collected. A reading that fails leaves that gauge out of the scrape
   * (counted in COLLECT_ERRORS_TOTAL) rather than failing the whole scrape.
   */
  gauge(name: string, help: string, labelNames: readonly string[], read: () => Iterable<[Record<string, string>, number]>): void {
    const owner = this;
    new Gauge({
      name,
      help,
      labelNames: [...labelNames],
      registers: [this.registry],
      collect() {
        this.reset();
        if (owner.retired) return;
        let values: Array<[Record<string, string>, number]>;
        try {
          values = [...read()];
        } catch {
          owner.count(COLLECT_ERRORS_TOTAL, { gauge: name });
          return;
        }
        for (const [labels, value] of values) this.set(labels, value);
      },
    });
  }

  /**
   * Drops the series of counter or histogram `def` whose labels include
   * `match` (a purged job's restarts, say): a series of something gone for
   * good would otherwise be scraped, and held in memory, for as long as the
   * agent runs. Returns how many series went.
   */
  async forgetSeries<L extends string>(def: MetricDef<L>, match: Partial<MetricLabels<L>>): Promise<number> {
    const known = this.made.get(def.name);
    if (!known) return 0;
    const metric = known.metric;
    const wanted = Object.entries(match as Record<string, string>);
    const seen = new Set<string>();
    let dropped = 0;
    for (const value of (await metric.get()).values) {
      const labels: Record<string, string> = {};
      // A histogram lists each series once per bucket (with `le`) and for its sum and count: only the series' own labels count.
      for (const name of def.labels) if (value.labels[name] !== undefined) labels[name] = String(value.labels[name]);
      if (!wanted.every(([k, v]) => labels[k] === v)) continue;
      const key = JSON.stringify(labels);
      if (seen.has(key)) continue;
      seen.add(key);
      metric.remove(labels);
      dropped++;
    }
    return dropped;
  }

  /** The agent is gone: the gauges read nothing from here on; what was recorded stays. */
  retire(): void {
    this.retired = true;
  }

  /** This agent's figures and the process's, in Prometheus's text format. */
  async prometheus(): Promise<string> {
    return this.merged().metrics();
  }

  /** The same figures as JSON: prom-client's list of metrics, each with its values and labels. */
  async json(): Promise<unknown[]> {
    return this.merged().getMetricsAsJSON();
  }

  readonly contentType = Registry.PROMETHEUS_CONTENT_TYPE;

  private merged(): Registry {
    return Registry.merge([this.registry, processMetrics()]);
  }

  private metricFor(def: MetricDef): Metric {
    const known = this.made.get(def.name);
    if (known) {
      if (known.def !== def) {
        // Two packages declaring one name differently would make one of them record into the wrong shape.
        const same =
          known.def.kind === def.kind &&
          known.def.labels.join() === def.labels.join() &&
          (known.def.buckets ?? []).join() === (def.buckets ?? []).join();
        if (!same)
          throw new Error(
            `metric ${def.name} is declared twice, differently (${known.def.kind} [${known.def.labels.join(', ')}] and ${def.kind} [${def.labels.join(', ')}], or other buckets)`,
          );
      }
      return known.metric;
    }
    const common = { name: def.name, help: def.help, labelNames: [...def.labels], registers: [this.registry] };
    const metric =
      def.kind === 'counter' ? new Counter(common) : new Histogram({ ...common, buckets: [...(def.buckets ?? DEFAULT_BUCKETS)] });
    this.made.set(def.name, { def, metric });
    return metric;
  }
}

function countBy<T>(items: Iterable<T>, key: (item: T) => Record<string, string> | undefined): Array<[Record<string, string>, number]> {
  const counts = new Map<string, [Record<string, string>, number]>();
  for (const item of items) {
    const labels = key(item);
    if (!labels) continue;
    const k = JSON.stringify(labels);
    const entry = counts.get(k);
    if (entry) entry[1]++;
    else counts.set(k, [labels, 1]);
  }
  return [...counts.values()];
}

/** The gauges read from the agent's state at collect time. */
export function addStateGauges(metrics: PromMetrics, state: MetricsState): void {
  metrics.gauge(
    'csiplug_plugin_instances',
    'CSI plugin instances the CSI manager tracks, by plugin, kind (controller, node) and health',
    ['plugin', 'kind', 'health'],
    function* () {
      for (const p of state.service.listPlugins()) {
        for (const kind of ['controller', 'node'] as const) {
          const inst = p[kind];
          if (inst) yield [{ plugin: p.id, kind, health: inst.healthy ? 'healthy' : 'unhealthy' }, 1];
        }
      }
    },
  );
  metrics.gauge('csiplug_plugins', 'CSI plugins known to the agent, by whether every expected instance is healthy', ['healthy'], () => {
    const plugins = state.service.listPlugins();
    const healthy = plugins.filter(
      (p) =>
        p.nodesHealthy + p.controllersHealthy === p.nodesExpected + p.controllersExpected && p.nodesExpected + p.controllersExpected > 0,
    ).length;
    return [
      [{ healthy: 'true' }, healthy],
      [{ healthy: 'false' }, plugins.length - healthy],
    ];
  });
  metrics.gauge(
    'csiplug_registry_entries',
    'Registrations in the dynamic plugin registry (two while an upgrade overlaps), by plugin type',
    ['type'],
    () => Object.entries(state.registryEntries()).map(([type, n]) => [{ type }, n]),
  );
  metrics.gauge('csiplug_volumes', 'Volumes in the catalog, by plugin', ['plugin'], () =>
    countBy(state.service.listVolumes(), (v) => ({ plugin: v.pluginId })),
  );
  metrics.gauge('csiplug_volume_claims', 'Claims on volumes, by plugin and mode (read, write)', ['plugin', 'mode'], () =>
    countBy(
      state.service.listVolumes().flatMap((v) => v.claims.map((c) => ({ plugin: v.pluginId, mode: c.mode }))),
      (c) => c,
    ),
  );
  metrics.gauge('csiplug_allocs', 'Allocations the agent knows, by client status', ['status'], () =>
    countBy(state.service.listAllocs(), (a) => ({ status: a.clientStatus })),
  );
  metrics.gauge('csiplug_unmounts_pending', 'Volume unmounts still to be done (being retried, or waiting for their plugin)', [], () => [
    [{}, state.pendingUnmounts()],
  ]);
  // abnormal: a plugin's word, reported and never acted on — this gauge is where an operator sees it across allocs.
  metrics.gauge(
    'csiplug_live_mounts',
    'Live volume mounts, by plugin and their last check (ok, abnormal: the plugin reports the volume abnormal, stale, busy: stale but in use, remounting, plugin-away)',
    ['plugin', 'state'],
    () => countBy(state.liveMounts(), (m) => ({ plugin: m.pluginId, state: m.state })),
  );
  // After the gauges: a scrape reads metrics in the order they were made, so this one counts the failures of the same scrape.
  metrics.declare(COLLECT_ERRORS_TOTAL);
}

/** Counts the agent's events, and its task restarts among them. */
export function countEvents(metrics: PromMetrics, e: AgentEvent): void {
  metrics.count(EVENTS_TOTAL, { topic: e.topic, type: e.type });
  if (e.topic === 'Task' && e.type === 'Restarting') metrics.count(TASK_RESTARTS_TOTAL, { job: e.jobId ?? '', task: e.task ?? '' });
}
