import { defineMetric } from '@csiplug/core';
import { PromMetrics, TASK_RESTARTS_TOTAL, addStateGauges, countEvents } from './metrics';
import type { PluginView, VolumeView, AllocView } from '@csiplug/api';

const CALLS = defineMetric({ name: 'csiplug_test_call_seconds', help: 'calls', kind: 'histogram', labels: ['rpc'], buckets: [0.1, 1] });
const THINGS = defineMetric({ name: 'csiplug_test_things_total', help: 'things', kind: 'counter', labels: ['kind'] });

function line(text: string, series: string): number | undefined {
  const l = text.split('\n').find((s) => s.startsWith(`${series} `));
  return l === undefined ? undefined : Number(l.slice(series.length + 1));
}

describe('PromMetrics', () => {
  it('records counters and histograms under their labels, and lists declared metrics before any sample', async () => {
    const m = new PromMetrics();
    m.declare(CALLS, THINGS);
    expect(await m.prometheus()).toContain('# TYPE csiplug_test_call_seconds histogram');
    m.observe(CALLS, 0.5, { rpc: 'Probe' });
    m.observe(CALLS, 2, { rpc: 'Probe' });
    m.count(THINGS, { kind: 'a' });
    m.count(THINGS, { kind: 'a' }, 2);
    const text = await m.prometheus();
    expect(line(text, 'csiplug_test_call_seconds_bucket{le="1",rpc="Probe"}')).toBe(1);
    expect(line(text, 'csiplug_test_call_seconds_count{rpc="Probe"}')).toBe(2);
    expect(line(text, 'csiplug_test_things_total{kind="a"}')).toBe(3);
    // The process's own figures come along.
    expect(text).toContain('process_resident_memory_bytes');
  });

  it('two agents in one process keep separate figures', async () => {
    const a = new PromMetrics();
    const b = new PromMetrics();
    a.count(THINGS, { kind: 'x' });
    expect(line(await a.prometheus(), 'csiplug_test_things_total{kind="x"}')).toBe(1);
    expect(line(await b.prometheus(), 'csiplug_test_things_total{kind="x"}')).toBeUndefined();
  });

  it('refuses one name declared twice with another shape', () => {
    const m = new PromMetrics();
    m.declare(THINGS);
    const clash = defineMetric({ name: 'csiplug_test_things_total', help: 'other', kind: 'counter', labels: ['other'] });
    expect(() => m.count(clash, { other: '1' })).toThrow(/declared twice, differently/);
  });

  it('reads the state gauges when collected, so they follow the state', async () => {
    const m = new PromMetrics();
    let volumes: Partial<VolumeView>[] = [
      {
        id: 'v1',
        pluginId: 'p',
        claims: [{ allocId: 'a', mode: 'write', accessMode: 'single-node-writer', attachmentMode: 'file-system', since: 0 }],
      },
    ];
    const plugins: Partial<PluginView>[] = [
      {
        id: 'p',
        controllersHealthy: 0,
        controllersExpected: 0,
        nodesHealthy: 1,
        nodesExpected: 1,
        node: { healthy: true, allocId: 'x', description: '', version: '', info: {} },
      },
    ];
    addStateGauges(m, {
      service: {
        listPlugins: () => plugins as PluginView[],
        listVolumes: () => volumes as VolumeView[],
        listAllocs: () => [{ clientStatus: 'running' }, { clientStatus: 'running' }, { clientStatus: 'failed' }] as AllocView[],
      },
      registryEntries: () => ({ 'csi-node': 1 }),
      pendingUnmounts: () => 2,
      liveMounts: () => [
        { pluginId: 'p', state: 'ok' },
        { pluginId: 'p', state: 'abnormal' },
        { pluginId: 'p', state: 'abnormal' },
      ],
    });
    let text = await m.prometheus();
    expect(line(text, 'csiplug_volume_claims{plugin="p",mode="write"}')).toBe(1);
    expect(line(text, 'csiplug_plugin_instances{plugin="p",kind="node",health="healthy"}')).toBe(1);
    expect(line(text, 'csiplug_plugins{healthy="true"}')).toBe(1);
    expect(line(text, 'csiplug_allocs{status="running"}')).toBe(2);
    expect(line(text, 'csiplug_allocs{status="failed"}')).toBe(1);
    expect(line(text, 'csiplug_unmounts_pending')).toBe(2);
    expect(line(text, 'csiplug_registry_entries{type="csi-node"}')).toBe(1);
    expect(line(text, 'csiplug_live_mounts{plugin="p",state="abnormal"}')).toBe(2);
    expect(line(text, 'csiplug_live_mounts{plugin="p",state="ok"}')).toBe(1);
    volumes = [];
    text = await m.prometheus();
    expect(line(text, 'csiplug_volume_claims{plugin="p",mode="write"}')).toBeUndefined();
  });

  it('a gauge whose reading fails is left out and counted, the rest of the scrape stands; a retired agent reads no gauges', async () => {
    const m = new PromMetrics();
    let broken = true;
    addStateGauges(m, {
      service: {
        listPlugins: () => [],
        listVolumes: () => {
          if (broken) throw new Error('the database is not open');
          return [];
        },
        listAllocs: () => [{ clientStatus: 'running' }] as AllocView[],
      },
      registryEntries: () => ({}),
      pendingUnmounts: () => 0,
      liveMounts: () => [],
    });
    let text = await m.prometheus();
    expect(line(text, 'csiplug_allocs{status="running"}')).toBe(1);
    expect(line(text, 'csiplug_metrics_collect_errors_total{gauge="csiplug_volumes"}')).toBe(1);
    expect(line(text, 'csiplug_metrics_collect_errors_total{gauge="csiplug_volume_claims"}')).toBe(1);
    broken = false;
    m.retire();
    text = await m.prometheus();
    expect(line(text, 'csiplug_allocs{status="running"}')).toBeUndefined();
    expect(line(text, 'csiplug_metrics_collect_errors_total{gauge="csiplug_volumes"}')).toBe(1);
  });

  it('refuses to count a histogram or observe a counter, and a clash of buckets', () => {
    const m = new PromMetrics();
    expect(() => m.count(CALLS as never, { rpc: 'x' } as never)).toThrow(
      /is a histogram, not a counter: it takes measured values, not counts/,
    );
    expect(() => m.observe(THINGS as never, 1, { kind: 'x' } as never)).toThrow(
      /is a counter, not a histogram: it takes counts, not measured values/,
    );
    m.declare(CALLS);
    const other = defineMetric({ name: CALLS.name, help: 'calls', kind: 'histogram', labels: ['rpc'], buckets: [5] });
    expect(() => m.observe(other, 1, { rpc: 'x' })).toThrow(/declared twice, differently/);
  });

  it('counts events by topic and type, and task restarts by job and task', async () => {
    const m = new PromMetrics();
    countEvents(m, { index: 1, time: 0, topic: 'Task', type: 'Restarting', message: '', jobId: 'j', task: 't' });
    countEvents(m, { index: 2, time: 0, topic: 'Task', type: 'Started', message: '', jobId: 'j', task: 't' });
    const text = await m.prometheus();
    expect(line(text, 'csiplug_task_restarts_total{job="j",task="t"}')).toBe(1);
    expect(line(text, 'csiplug_events_total{topic="Task",type="Started"}')).toBe(1);
  });

  it('forgets the series of a purged job, and only those', async () => {
    const m = new PromMetrics();
    for (const [job, task] of [
      ['j', 't'],
      ['j', 'u'],
      ['k', 't'],
    ])
      countEvents(m, { index: 1, time: 0, topic: 'Task', type: 'Restarting', message: '', jobId: job, task });
    expect(await m.forgetSeries(TASK_RESTARTS_TOTAL, { job: 'j' })).toBe(2);
    const text = await m.prometheus();
    expect(text).not.toContain('csiplug_task_restarts_total{job="j"');
    expect(line(text, 'csiplug_task_restarts_total{job="k",task="t"}')).toBe(1);
    expect(await m.forgetSeries(TASK_RESTARTS_TOTAL, { job: 'gone' })).toBe(0);
  });

  it('forgets a histogram series once, whatever its buckets', async () => {
    const m = new PromMetrics();
    m.observe(CALLS, 0.2, { rpc: 'a' });
    m.observe(CALLS, 0.2, { rpc: 'b' });
    expect(await m.forgetSeries(CALLS, { rpc: 'a' })).toBe(1);
    const text = await m.prometheus();
    expect(text).not.toMatch(/rpc="a"/);
    expect(text).toMatch(/rpc="b"/);
  });
});
