// Events through Nomad's Events envelope and back, and Nomad's topic filter.
import type { AgentEvent } from '../service';
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

  it('a heartbeat, and a topic csiplug does not send, decode to nothing', () => {
    expect(decodeEvents({})).toEqual([]);
    expect(decodeEvents({ Index: 3, Events: [{ ...encodeEvent(FULL).Events[0]!, Topic: 'Evaluation' }] })).toEqual([]);
  });

  it("filters as Nomad's ?topic=Topic:key does: the whole topic, or the Key or a FilterKey", () => {
    const e = encodeEvent(FULL).Events[0]!;
    expect(eventMatches(undefined, e)).toBe(true);
    expect(eventMatches(new Map([['CSIVolume', '*']]), e)).toBe(true);
    expect(eventMatches(new Map([['CSIVolume', new Set(['vol-1'])]]), e)).toBe(true);
    expect(eventMatches(new Map([['CSIVolume', new Set(['web'])]]), e)).toBe(true);
    expect(eventMatches(new Map([['CSIVolume', new Set(['vol-2'])]]), e)).toBe(false);
    expect(eventMatches(new Map([['Job', '*']]), e)).toBe(false);
    expect(topicQueryValues(['Alloc', 'Task'])).toEqual(['Allocation:*', 'Task:*']);
  });
});
