// Hooks run in an explicit order: the list's order for setup phases, the
// reverse for teardown, so what was set up last is torn down first.
import { CsiplugError, errorMessage } from '@csiplug/core';
import type {
  AllocHook,
  AllocHookContext,
  AllocHookPhase,
  AllocPrerunResult,
  TaskHook,
  TaskHookContext,
  TaskHookPhase,
  TaskPrestartResult,
} from './hook';

export class HookError extends CsiplugError {
  constructor(
    readonly hook: string,
    readonly phase: string,
    cause: unknown,
  ) {
    super('EHOOK', `${phase} hook "${hook}" failed: ${errorMessage(cause)}`, { cause });
  }
}

const TEARDOWN = new Set(['stop', 'exited', 'postrun', 'destroy']);

function ordered<T>(hooks: readonly T[], phase: string): readonly T[] {
  return TEARDOWN.has(phase) ? [...hooks].reverse() : hooks;
}

/**
 * Runs one task phase over `hooks`. Setup phases stop at the first failure
 * (wrapped in HookError); teardown phases run every hook and then throw the
 * first failure, so one broken hook cannot leave another's resources behind.
 */
export async function runTaskHooks(hooks: readonly TaskHook[], phase: TaskHookPhase, ctx: TaskHookContext): Promise<TaskPrestartResult> {
  const env: Record<string, string> = {};
  const mounts: NonNullable<TaskPrestartResult['mounts']> = [];
  let firstError: HookError | undefined;
  for (const hook of ordered(hooks, phase)) {
    const fn = hook[phase];
    if (!fn) continue;
    try {
      const result = await fn.call(hook, { ...ctx, task: { ...ctx.task, env: { ...ctx.task.env, ...env } } });
      if (result && phase === 'prestart') {
        Object.assign(env, (result as TaskPrestartResult).env ?? {});
        mounts.push(...((result as TaskPrestartResult).mounts ?? []));
      }
    } catch (err) {
      const wrapped = err instanceof HookError ? err : new HookError(hook.name, phase, err);
      if (!TEARDOWN.has(phase)) throw wrapped;
      firstError ??= wrapped;
    }
  }
  if (firstError) throw firstError;
  return mounts.length ? { env, mounts } : { env };
}

/** Runs one alloc phase over `hooks`, with the same rules as runTaskHooks. */
export async function runAllocHooks(hooks: readonly AllocHook[], phase: AllocHookPhase, ctx: AllocHookContext): Promise<AllocPrerunResult> {
  const volumes: NonNullable<AllocPrerunResult['volumes']> = {};
  let firstError: HookError | undefined;
  for (const hook of ordered(hooks, phase)) {
    const fn = hook[phase];
    if (!fn) continue;
    try {
      const result = await fn.call(hook, ctx);
      if (result && phase === 'prerun') Object.assign(volumes, (result as AllocPrerunResult).volumes ?? {});
    } catch (err) {
      const wrapped = err instanceof HookError ? err : new HookError(hook.name, phase, err);
      if (!TEARDOWN.has(phase)) throw wrapped;
      firstError ??= wrapped;
    }
  }
  if (firstError) throw firstError;
  return { volumes };
}
