import { resolveTaskPath } from './task-paths';

const ISOLATED = { isolated: true as const };
const HOST = { isolated: false as const, taskDir: '/d/allocs/a1/web', sharedDir: '/d/allocs/a1/alloc' };
const vars = {
  NOMAD_ALLOC_DIR: '/alloc',
  NOMAD_ALLOC_INDEX: '2',
  'node.unique.name': 'n7',
  'meta.up': '../..',
  'meta.abs': '/etc',
};
const hostVars = { ...vars, NOMAD_ALLOC_DIR: '/d/allocs/a1/alloc', NOMAD_TASK_DIR: '/d/allocs/a1/web/local' };
const F = 'volume_mount.destination';

describe('resolveTaskPath', () => {
  it.each<[string, string]>([
    ['${NOMAD_ALLOC_DIR}/data', '/alloc/data'],
    ['/srv/${node.unique.name}/${NOMAD_ALLOC_INDEX}', '/srv/n7/2'],
    ['data/', '/data'],
  ])('an isolated task: %p is %p in its root', (raw, out) => {
    expect(resolveTaskPath(raw, F, vars, ISOLATED)).toEqual({ path: out });
  });

  it.each<[string, string]>([
    ['${NOMAD_ALLOC_DIR}/data', '/d/allocs/a1/alloc/data'],
    ['${NOMAD_TASK_DIR}/conf', '/d/allocs/a1/web/local/conf'],
    ['/srv/${NOMAD_ALLOC_INDEX}', '/d/allocs/a1/web/srv/2'],
    ['data', '/d/allocs/a1/web/data'],
  ])('a host process: %p is %p (a path variable keeps its host dir; anything else is under the task dir)', (raw, out) => {
    expect(resolveTaskPath(raw, F, hostVars, HOST)).toEqual({ path: out });
  });

  it.each<[string, typeof HOST | typeof ISOLATED, RegExp]>([
    [
      '${meta.abs}/x',
      HOST,
      /^volume_mount\.destination: "\$\{meta\.abs\}\/x" resolves to "\/etc\/x", which leaves the task's dirs \(\/d\/allocs\/a1\/web and \/d\/allocs\/a1\/alloc\): start it with/,
    ],
    ['x/${meta.up}', HOST, /resolves to "x\/\.\.\/\.\.", which leaves the task's dirs: a value with "\.\." or NUL cannot be a path here/],
    ['x/${meta.up}', ISOLATED, /which leaves the task's dirs/],
    ['${NOMAD_ALLOC_DIR}', HOST, /resolves to "\/d\/allocs\/a1\/alloc", the task's own dir itself: name a dir inside it/],
    ['${NOMAD_ALLOC_DIR}/', ISOLATED, /resolves to "\/alloc", the task's own dir itself: name a dir inside it/],
    [
      '${meta.none}/x',
      HOST,
      /^volume_mount\.destination: \$\{meta\.none\} has no value on this node: add none to the agent's client \{ meta \}/,
    ],
    ['${NOPE}', ISOLATED, /^volume_mount\.destination: \$\{NOPE\} has no value here/],
  ])('refuses %p (%o)', (raw, view, message) => {
    const out = resolveTaskPath(raw, F, view === HOST ? hostVars : vars, view);
    expect(out).toEqual({ error: expect.stringMatching(message) });
  });
});
