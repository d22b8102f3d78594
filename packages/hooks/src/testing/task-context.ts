// A small stand-in for the agent's task runner in unit tests: builds hook
// contexts and records the events and restart requests hooks make.
import type { AllocHookContext, AllocInfo, RunKind, TaskEvent, TaskHookContext, TaskInfo } from '../hook';

export interface RecordingTaskContext extends TaskHookContext {
  readonly events: TaskEvent[];
  readonly restarts: string[];
  readonly controller: AbortController;
}

export function taskContext(
  options: { alloc?: Partial<AllocInfo>; task?: Partial<TaskInfo>; kind?: RunKind; now?: () => number } = {},
): RecordingTaskContext {
  const events: TaskEvent[] = [];
  const restarts: string[] = [];
  const controller = new AbortController();
  return {
    alloc: { id: 'alloc-1', jobId: 'job', group: 'group', volumes: [], ...options.alloc },
    task: { name: 'plugin', env: {}, ...options.task },
    kind: options.kind ?? 'start',
    signal: controller.signal,
    controller,
    events,
    restarts,
    emitEvent: (e) => events.push({ time: options.now?.() ?? 0, ...e }),
    requestRestart: (reason) => restarts.push(reason),
  };
}

export interface RecordingAllocContext extends AllocHookContext {
  readonly events: TaskEvent[];
  /** The reasons of every restartTasks() call. */
  readonly restarts: string[];
  /** The volume names of every volumeRemounted() call. */
  readonly remounted: string[];
  readonly controller: AbortController;
}

export function allocContext(options: { alloc?: Partial<AllocInfo>; kind?: RunKind } = {}): RecordingAllocContext {
  const events: TaskEvent[] = [];
  const restarts: string[] = [];
  const remounted: string[] = [];
  const controller = new AbortController();
  return {
    alloc: { id: 'alloc-w', jobId: 'web', group: 'app', volumes: [], ...options.alloc },
    kind: options.kind ?? 'start',
    signal: controller.signal,
    controller,
    events,
    restarts,
    remounted,
    emitEvent: (e) => events.push({ time: 0, ...e }),
    restartTasks: (reason) => restarts.push(reason),
    volumeRemounted: (name) => remounted.push(name),
  };
}
