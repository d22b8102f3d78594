// The event stream on Nomad's wire (api/event_stream.go Events and Event,
// nomad/structs/event.go topics): each line `{"Index":N,"Events":[…]}`,
// heartbeats `{}`. csiplug's topics map onto Nomad's where they are the
// same thing (Alloc → Allocation, Plugin → CSIPlugin, Volume → CSIVolume,
// Job, Node); Task, a task's own events, is csiplug's and keeps its name.
// An event's Key is the ID of the object its topic names, FilterKeys the
// other IDs it carries (Nomad's `?topic=Job:web` matches either); its time,
// message and details ride in `Csiplug`. Pure functions: the stream
// encodes, the ApiClient decodes.
import type { AgentEvent } from '../service';

/** Nomad's event topics (nomad/structs/event.go; NodeDrain is an event type of Node, no topic), and Task, csiplug's own. */
export const NOMAD_EVENT_TOPICS = [
  'Deployment',
  'Evaluation',
  'Allocation',
  'Job',
  'Node',
  'NodePool',
  'ACLToken',
  'ACLPolicy',
  'ACLRole',
  'ACLAuthMethod',
  'ACLBindingRule',
  'Service',
  'HostVolume',
  'CSIVolume',
  'CSIPlugin',
  'Operator',
  'Variable',
  'Task',
] as const;
export type NomadEventTopic = (typeof NOMAD_EVENT_TOPICS)[number];

/** csiplug's topic → the Nomad topic it is sent under. */
export const WIRE_TOPIC: Readonly<Record<AgentEvent['topic'], NomadEventTopic>> = {
  Task: 'Task',
  Alloc: 'Allocation',
  Plugin: 'CSIPlugin',
  Volume: 'CSIVolume',
  Job: 'Job',
  Node: 'Node',
};

/** What csiplug adds to an event: its time and words, and the IDs that are not its Key. */
export interface EventExtras {
  /** ms since the epoch. */
  time: number;
  message: string;
  allocId?: string;
  task?: string;
  jobId?: string;
  pluginId?: string;
  volumeId?: string;
  details?: Record<string, string>;
}

/** Nomad's Event (api/event_stream.go, with structs.Event's Namespace). */
export interface NomadEvent {
  Topic: NomadEventTopic;
  Type: string;
  Key: string;
  Namespace: string;
  FilterKeys: string[];
  Index: number;
  /** Nomad's carries the object the event is about; csiplug's events carry no object. */
  Payload: Record<string, unknown>;
  Csiplug: EventExtras;
}

/** One line of the stream: Nomad's Events envelope. */
export interface NomadEvents {
  Index: number;
  Events: NomadEvent[];
}

type IdField = 'allocId' | 'jobId' | 'pluginId' | 'volumeId';
const ID_FIELDS: readonly IdField[] = ['allocId', 'jobId', 'pluginId', 'volumeId'];

/** The ID field an event's Key holds, by its csiplug topic (a Node event's Key is the node's ID, which the stream gives). */
const KEY_FIELD: Readonly<Record<AgentEvent['topic'], IdField | undefined>> = {
  Task: 'allocId',
  Alloc: 'allocId',
  Plugin: 'pluginId',
  Volume: 'volumeId',
  Job: 'jobId',
  Node: undefined,
};

/** Nomad's topics that are not namespaced (their events carry Namespace ""). */
const UNNAMESPACED: ReadonlySet<AgentEvent['topic']> = new Set(['Node', 'Plugin']);

/** `nodeId`: this node's ID, the Key of its Node events (Nomad's Node events are keyed by node ID). */
export function encodeEvent(e: AgentEvent, nodeId = ''): NomadEvents {
  const keyField = KEY_FIELD[e.topic];
  const extras: EventExtras = { time: e.time, message: e.message };
  const filterKeys: string[] = [];
  for (const field of ID_FIELDS) {
    const id = e[field];
    if (id === undefined || field === keyField) continue;
    extras[field] = id;
    filterKeys.push(id);
  }
  if (e.task !== undefined) extras.task = e.task;
  if (e.details !== undefined) extras.details = { ...e.details };
  return {
    Index: e.index,
    Events: [
      {
        Topic: WIRE_TOPIC[e.topic],
        Type: e.type,
        Key: keyField ? (e[keyField] ?? '') : e.topic === 'Node' ? nodeId : '',
        Namespace: UNNAMESPACED.has(e.topic) ? '' : 'default',
        FilterKeys: filterKeys,
        Index: e.index,
        Payload: {},
        Csiplug: extras,
      },
    ],
  };
}

/** The AgentEvents of one line of the stream (none for a heartbeat, or for a topic csiplug does not send). */
export function decodeEvents(wire: Partial<NomadEvents>): AgentEvent[] {
  const out: AgentEvent[] = [];
  for (const w of wire.Events ?? []) {
    const topic = (Object.keys(WIRE_TOPIC) as AgentEvent['topic'][]).find((t) => WIRE_TOPIC[t] === w.Topic);
    if (!topic) continue;
    const x = w.Csiplug;
    const keyField = KEY_FIELD[topic];
    const e: AgentEvent = { index: w.Index, topic, type: w.Type, time: x?.time ?? 0, message: x?.message ?? '' };
    for (const field of ID_FIELDS) {
      const id = field === keyField ? w.Key || undefined : x?.[field];
      if (id !== undefined) e[field] = id;
    }
    if (x?.task !== undefined) e.task = x.task;
    if (x?.details !== undefined) e.details = { ...x.details };
    out.push(e);
  }
  return out;
}

/**
 * Nomad's `?topic=` filter (command/agent/event_endpoint.go): topic → the
 * keys asked for it, `*` as a topic for every topic, `*` as a key for every
 * key. A topic csiplug does not send is kept: it lets nothing through.
 */
export type EventTopicFilter = Map<string, string[]>;

/**
 * Whether `filter` (undefined: everything) lets the event through, as
 * Nomad's nomad/stream/subscription.go filter: the keys of `*` and of the
 * event's topic together; `*` alone lets every event of the topic through,
 * otherwise the event's Key or one of its FilterKeys must be one of them.
 */
export function eventMatches(filter: EventTopicFilter | undefined, event: NomadEvent): boolean {
  if (!filter) return true;
  const all = filter.get('*') ?? [];
  if (all.length === 1 && all[0] === '*') return true;
  const keys = [...all, ...(filter.get(event.Topic) ?? [])];
  if (keys.length === 1 && keys[0] === '*') return true;
  return keys.some((k) => event.Key === k || event.FilterKeys.includes(k));
}

/** The `topic` query values csiplug's client sends for its topics: Nomad's `Topic:*`. */
export function topicQueryValues(topics: readonly AgentEvent['topic'][]): string[] {
  return topics.map((t) => `${WIRE_TOPIC[t]}:*`);
}
