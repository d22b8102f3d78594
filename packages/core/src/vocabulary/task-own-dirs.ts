// The paths an isolated task's own dirs take inside it — its /local, /alloc
// and /secrets, and /, /proc, /dev, /sys and /tmp — and the one rule of
// which chroot_env task paths they leave free. The agent config reader
// refuses a chroot_env entry by it at load; the driver checks the bundle by
// it again at each start: one list for both.

/** Where the task sees its own dirs. */
export const TASK_LOCAL_DIR = '/local';
export const TASK_ALLOC_DIR = '/alloc';
export const TASK_SECRETS_DIR = '/secrets';

/** Paths the task's own dirs take: no chroot_env dir may land on them, nor below them (but below /tmp, bound on top of the task's tmpfs). */
export const TASK_OWN_PATHS: readonly string[] = Object.freeze([
  '/',
  '/proc',
  '/dev',
  '/sys',
  '/tmp',
  TASK_LOCAL_DIR,
  TASK_ALLOC_DIR,
  TASK_SECRETS_DIR,
]);

/** Whether a chroot_env dir shown at the normalised task path `inTask` would land on or below the task's own dirs. */
export function isTaskOwnPath(inTask: string): boolean {
  return TASK_OWN_PATHS.some((r) => inTask === r || (r !== '/' && r !== '/tmp' && inTask.startsWith(`${r}/`)));
}

/** The task's own paths as an operator reads them in a refusal. */
export function taskOwnPathsText(): string {
  return `${TASK_OWN_PATHS.filter((r) => r !== '/').join(', ')}, /`;
}
