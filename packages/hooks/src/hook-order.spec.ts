import type { AllocHook, TaskHook } from './hook';
import { HookError, runAllocHooks, runTaskHooks } from './hook-order';
import { allocContext, taskContext } from './testing/task-context';

describe('hook order', () => {
  it('runs setup phases in list order, passing env along, and teardown in reverse', async () => {
    const seen: string[] = [];
    const hook = (name: string, env?: Record<string, string>): TaskHook => ({
      name,
      prestart: async (ctx) => {
        seen.push(`prestart ${name} sees ${JSON.stringify(ctx.task.env)}`);
        return { env };
      },
      stop: async () => {
        seen.push(`stop ${name}`);
      },
    });
    const ctx = taskContext({ task: { env: { A: '1' } } });
    const result = await runTaskHooks([hook('one', { B: '2' }), hook('two', { C: '3' })], 'prestart', ctx);
    await runTaskHooks([hook('one'), hook('two')], 'stop', ctx);
    expect(result.env).toEqual({ B: '2', C: '3' });
    expect(seen).toEqual(['prestart one sees {"A":"1"}', 'prestart two sees {"A":"1","B":"2"}', 'stop two', 'stop one']);
  });

  it('a setup failure stops the phase; a teardown failure does not stop the other hooks', async () => {
    const ran: string[] = [];
    const failing: TaskHook = {
      name: 'bad',
      prestart: async () => {
        throw new Error('no dir');
      },
      stop: async () => {
        throw new Error('stuck');
      },
    };
    const after: TaskHook = { name: 'after', prestart: async () => void ran.push('prestart'), stop: async () => void ran.push('stop') };
    const ctx = taskContext();
    await expect(runTaskHooks([failing, after], 'prestart', ctx)).rejects.toThrow('prestart hook "bad" failed: no dir');
    const err = await runTaskHooks([after, failing], 'stop', ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HookError);
    expect(ran).toEqual(['stop']);
  });

  it('alloc hooks merge their volumes and tear down in reverse', async () => {
    const order: string[] = [];
    const hook = (name: string): AllocHook => ({
      name,
      prerun: async () => {
        order.push(`prerun ${name}`);
        return { volumes: { [name]: { name, volumeId: name, pluginId: 'p', hostPath: `/x/${name}`, readOnly: false } } };
      },
      postrun: async () => void order.push(`postrun ${name}`),
    });
    const ctx = allocContext();
    const result = await runAllocHooks([hook('a'), hook('b')], 'prerun', ctx);
    await runAllocHooks([hook('a'), hook('b')], 'postrun', ctx);
    expect(Object.keys(result.volumes!)).toEqual(['a', 'b']);
    expect(order).toEqual(['prerun a', 'prerun b', 'postrun b', 'postrun a']);
  });
});
