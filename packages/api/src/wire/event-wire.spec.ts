// Events through Nomad's Events envelope and back, and Nomad's topic filter.
import type { AgentEvent } from '../service';
import { parseTopics } from '../event-stream';
import { type NomadEvents, decodeEvents, encodeEvent, eventMatches, topicQueryValues } from './event-wire';

const viaJson = (value: unknown): NomadEvents => JSON.parse(JSON.stringify(value)) as NomadEvents;

const FULL: AgentEvent = {
  index: 42,
  topic: 'Volume',
  type: 'Mount volume',
  time: 1_733_325_000_123,
  message: 'Mount volume vol-1 for alloc a-1: ok',
  allocId: 'a-1',
  task: 'main',
  jobId: 'web',
  pluginId: 'hostpath',
  volumeId: 'vol-1',
  details: { success: 'true' },
};

describe("events on Nomad's wire", () => {
  it('an event with every field set, and with none, comes back as it was, under each topic', () => {
    for (const topic of ['Task', 'Alloc', 'Plugin', 'Volume', 'Job', 'Node'] as const) {
      for (const e of [
        { ...FULL, topic },
        { index: 1, topic, type: 'Started', time: 5, message: '' },
      ]) {
        expect(decodeEvents(viaJson(encodeEvent(e)))).toEqual([e]);
      }
    }
  });

  it("is Nomad's envelope: the topic, the object's ID as Key, the other IDs as FilterKeys", () => {
    expect(encodeEvent(FULL)).toEqual({
      Index: 42,
      Events: [
        {
          Topic: 'CSIVolume',
          Type: 'Mount volume',
          Key: 'vol-1',
          Namespace: 'default',
          FilterKeys: ['a-1', 'web', 'hostpath'],
          Index: 42,
          Payload: {},
          Csiplug: {
            time: 1_733_325_000_123,
            message: 'Mount volume vol-1 for alloc a-1: ok',
            allocId: 'a-1',
            jobId: 'web',
            pluginId: 'hostpath',
            task: 'main',
            details: { success: 'true' },
          },
        },
      ],
    });
    expect(encodeEvent({ ...FULL, topic: 'Alloc' }).Events[0]).toMatchObject({ Topic: 'Allocation', Key: 'a-1' });
    expect(encodeEvent({ ...FULL, topic: 'Plugin' }).Events[0]).toMatchObject({ Topic: 'CSIPlugin', Key: 'hostpath' });
  });

  it("a Node event's Key is the node's ID; Node and CSIPlugin events are in no namespace", () => {
    const node = encodeEvent({ index: 4, topic: 'Node', type: 'NodeRegistration', time: 1, message: 'up' }, 'node-1a2b').Events[0]!;
    expect(node).toMatchObject({ Topic: 'Node', Key: 'node-1a2b', Namespace: '' });
    expect(encodeEvent({ ...FULL, topic: 'Plugin' }).Events[0]).toMatchObject({ Topic: 'CSIPlugin', Namespace: '' });
    expect(encodeEvent(FULL).Events[0]).toMatchObject({ Topic: 'CSIVolume', Namespace: 'default' });
  });

  it('a heartbeat, and a topic csiplug does not send, decode to nothing', () => {
    expect(decodeEvents({})).toEqual([]);
    expect(decodeEvents({ Index: 3, Events: [{ ...encodeEvent(FULL).Events[0]!, Topic: 'Evaluation' }] })).toEqual([]);
  });

  it("filters as Nomad's ?topic=Topic:key does: the whole topic, or the Key or a FilterKey", () => {
    const e = encodeEvent(FULL).Events[0]!;
    const matches = (...topics: string[]) => eventMatches(parseTopics(topics), e);
    expect(eventMatches(undefined, e)).toBe(true);
    expect(matches('CSIVolume')).toBe(true);
    expect(matches('CSIVolume:*')).toBe(true);
    expect(matches('CSIVolume:vol-1')).toBe(true);
    expect(matches('CSIVolume:web')).toBe(true);
    expect(matches('CSIVolume:vol-2')).toBe(false);
    expect(matches('Job:*')).toBe(false);
    // `*` as the topic: every topic, with its key filter kept.
    expect(matches('*')).toBe(true);
    expect(matches('*:web')).toBe(true);
    expect(matches('*:vol-2')).toBe(false);
    expect(eventMatches(parseTopics(['*:web']), encodeEvent({ ...FULL, topic: 'Job', jobId: 'api' }).Events[0]!)).toBe(false);
    // A topic csiplug does not send is accepted and lets nothing through; a comma is part of the topic's name.
    expect(matches('Bogus')).toBe(false);
    expect(matches('NodeDrain')).toBe(false);
    expect(matches('CSIVolume,Job')).toBe(false);
    expect(() => parseTopics(['Job:a:b'])).toThrow(/invalid key value pair/);
    expect(topicQueryValues(['Alloc', 'Task'])).toEqual(['Allocation:*', 'Task:*']);
  });
});
