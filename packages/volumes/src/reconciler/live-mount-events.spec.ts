// How the reconciler's findings about live mounts are told
// (live-mount-events.ts), on its own: to every listener and to the listeners
// of the finding's alloc only, kept as the last finding per mount until the
// mount is forgotten, a throwing listener logged (the others still hear),
// and nothing held or told once disposed.
import { MemoryLogger } from '@csiplug/core';
import { LiveMountEvents } from './live-mount-events';
import type { LiveMountEvent, LiveMountEventKind } from './reconciler-service';

function event(allocId: string, kind: LiveMountEventKind = 'checked', name = 'data'): LiveMountEvent {
  return {
    kind,
    allocId,
    name,
    volumeId: 'vol1',
    pluginId: 'hostpath',
    targetPath: `/mnt/${allocId}/${name}`,
    policy: 'remount',
    message: `${kind} ${allocId} ${name}`,
    time: 1,
  };
}

let log: MemoryLogger;
let events: LiveMountEvents;
beforeEach(() => {
  log = new MemoryLogger();
  events = new LiveMountEvents(log);
});
afterEach(() => events.dispose());

test("every listener hears every finding; an alloc's listeners hear only that alloc's", () => {
  const all: string[] = [];
  const a1: string[] = [];
  const a1b: string[] = [];
  const a2: string[] = [];
  events.onDidCheckMount((e) => all.push(e.message));
  events.onDidCheckMountOf('a1')((e) => a1.push(e.message));
  events.onDidCheckMountOf('a1')((e) => a1b.push(e.message));
  events.onDidCheckMountOf('a2')((e) => a2.push(e.message));
  events.emit(event('a1'));
  events.emit(event('a2', 'stale'));
  events.emit(event('a3'));
  expect(all).toEqual(['checked a1 data', 'stale a2 data', 'checked a3 data']);
  expect(a1).toEqual(['checked a1 data']);
  expect(a1b).toEqual(['checked a1 data']);
  expect(a2).toEqual(['stale a2 data']);
});

test('the last finding is kept per mount (alloc and name) until the mount is forgotten', () => {
  expect(events.last('a1/data')).toBeUndefined();
  events.emit(event('a1', 'plugin-away'));
  events.emit(event('a1', 'checked'));
  events.emit(event('a1', 'stale', 'logs'));
  expect(events.last('a1/data')!.kind).toBe('checked');
  expect(events.last('a1/logs')!.kind).toBe('stale');
  events.forget('a1/data');
  expect(events.last('a1/data')).toBeUndefined();
  expect(events.last('a1/logs')!.kind).toBe('stale');
});

test('a listener that throws is logged, and the others still hear', () => {
  const heard: string[] = [];
  events.onDidCheckMount(() => {
    throw new Error('all broke');
  });
  events.onDidCheckMount((e) => heard.push(`all ${e.allocId}`));
  events.onDidCheckMountOf('a1')(() => {
    throw new Error('a1 broke');
  });
  events.onDidCheckMountOf('a1')((e) => heard.push(`a1 ${e.allocId}`));
  events.emit(event('a1'));
  expect(heard).toEqual(['all a1', 'a1 a1']);
  expect(log.find('a listener of live mount checks threw; the others still ran', 'error').map((l) => l.fields)).toEqual([
    { error: 'all broke' },
    { alloc_id: 'a1', error: 'a1 broke' },
  ]);
});

test("an alloc's listener that leaves hears no more; the others of the alloc still do, and a new one hears the next", () => {
  const first: string[] = [];
  const second: string[] = [];
  const sub1 = events.onDidCheckMountOf('a1')((e) => first.push(e.kind));
  const sub2 = events.onDidCheckMountOf('a1')((e) => second.push(e.kind));
  sub1.dispose();
  events.emit(event('a1', 'plugin-away'));
  sub2.dispose();
  events.emit(event('a1', 'plugin-back'));
  const third: string[] = [];
  events.onDidCheckMountOf('a1')((e) => third.push(e.kind));
  events.emit(event('a1', 'checked'));
  expect(first).toEqual([]);
  expect(second).toEqual(['plugin-away']);
  expect(third).toEqual(['checked']);
});

test('once disposed, nobody hears, and a late listener is given a harmless subscription', () => {
  const heard: string[] = [];
  events.onDidCheckMount((e) => heard.push(`all ${e.allocId}`));
  events.onDidCheckMountOf('a1')((e) => heard.push(`a1 ${e.allocId}`));
  events.dispose();
  const late = events.onDidCheckMountOf('a1')((e) => heard.push(`late ${e.allocId}`));
  events.emit(event('a1'));
  expect(heard).toEqual([]);
  expect(() => late.dispose()).not.toThrow();
});
