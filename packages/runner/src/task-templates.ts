// A task's template blocks at run time: rendered (jobspec's Go-template
// subset) before each start of the task, and again when the agent reloads
// its config (SIGHUP), when a file that changed gets its change_mode as
// Nomad's template manager applies it: restart wins over signals, a splay
// waits first, noop only writes.
//
// Files are written as the agent, root, into dirs a task can write to: a
// task may have planted symlinks there. So every dir on the way is opened
// one component at a time through the one before it, never following a
// symlink (beneath.ts); the file is written to a
// temporary name in its dir (O_EXCL, O_NOFOLLOW), its mode and owner set,
// fsynced, and renamed over the destination (which replaces a link rather
// than writing through it). A source file an isolated task's template reads
// must be in its own task dir (Nomad's file sandbox), alloc/ there being the
// alloc's shared dir as the task sees it, reached the same way: never a
// sibling task's dir (its secrets/) nor what the agent keeps in the alloc dir.
import { errorMessage, isTransientFsError, type Logger } from '@csiplug/core';
import type { IsolationConfig, TaskDriver, TaskHandle } from '@csiplug/driver';
import { GO_TEMPLATE_LIMITS, GoTemplateError, parseGoTemplate, type GoTemplate, type TaskTemplate } from '@csiplug/jobspec';
import { randomBytes } from 'crypto';
import { openDirBeneath, type BeneathRefusal } from './beneath';
import * as fs from 'fs';
import * as path from 'path';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY, O_NONBLOCK } = fs.constants;

/** Events as Nomad's template manager gives them (with the runner's "Restart Signaled" for a restart). */
export const TEMPLATE_EVENT = {
  signaling: 'Signaling',
  /** A re-render on a reload that a fault of the agent itself (EMFILE, ENOSPC…) stopped: the task runs on with the file it has. */
  notRendered: 'Template Not Rendered',
} as const;

/** What Nomad's template manager says when a restart template changed. */
export const TEMPLATE_RESTART_REASON = 'Template with change_mode restart re-rendered';

/** Where a task's templates are written, and as whom. */
export interface TemplateTarget {
  /** The task dir on the host: a destination is relative to it. */
  taskDir: string;
  /** The alloc's shared dir on the host, where a destination under alloc/ goes. */
  sharedDir: string;
  /** Owner of what is written when the template names no uid/gid: an isolated task's user (absent: the agent). */
  owner?: { uid: number; gid: number };
  /**
   * An isolated task's: a source file must be in its task dir, or under
   * alloc/ there (read from `sharedDir`); absent: any path (a host process).
   */
  sandboxed?: true;
}

/** The target of a task in `taskDir` (`<alloc dir>/<task>`), isolated as `isolation` says (undefined: a host process). */
export function templateTarget(taskDir: string, isolation: IsolationConfig | undefined): TemplateTarget {
  return {
    taskDir,
    sharedDir: isolation?.allocDir ?? path.join(path.dirname(taskDir), 'alloc'),
    ...(isolation?.user ? { owner: { uid: isolation.user.uid, gid: isolation.user.gid } } : {}),
    ...(isolation ? { sandboxed: true as const } : {}),
  };
}

/** A template that could not be rendered or written: names its destination and says why. */
export class TemplateRenderError extends Error {
  constructor(
    readonly destination: string,
    reason: string,
  ) {
    super(`template "${destination}": ${reason}`);
    this.name = 'TemplateRenderError';
  }
}

/** What a reload may do to the running task (the task runner's own means). */
export interface TemplateChangeActions {
  /** Restart the task, not counted as a failure. */
  restart(reason: string): void;
  /** Send a signal to the running task through its driver. */
  signal(signal: NodeJS.Signals): Promise<void>;
  /**
   * Kill the task and fail it, never restarted: Nomad's template manager
   * does so (Lifecycle.Kill with SetFailsTask) when a template fails or a
   * change_signal cannot be sent once the task runs. `reason` is the event.
   */
  fail(reason: string): void;
  event(e: { type: string; message: string; failed?: boolean }): void;
  /** Wait `ms` (the splay), on the runner's clock; rejects when the task stops meanwhile. */
  sleep(ms: number): Promise<void>;
  /** In [0, 1): where in the splay the change applies. */
  random(): number;
  /**
   * Whether the task still runs as it did when the reload was asked for
   * (running, not stopping, the same handle): a reload queued behind
   * another's splay checks it again before rendering and after its own
   * splay, and does nothing to a task that stopped or restarted meanwhile.
   */
  live(): boolean;
}

/** What a task's templates render with: its environment, the node's values, and where they go. */
export interface TemplateRenderInput {
  /** The task's environment (its variables and env block). */
  env: Record<string, string>;
  /**
   * The node's `attr.*`, `node.*` and `meta.*` (jobspec's nodeValues()):
   * seen by `${…}` and `{{ env "…" }}` as Nomad's TaskEnv.All() has them
   * (a node value wins), never put in the task's process environment.
   */
  nodeValues: Record<string, string>;
  target: TemplateTarget;
}

export class TaskTemplates {
  /** A change_signal sent through the task's driver to its running process (`handle()`: the one it runs now). */
  static signalThrough(driver: TaskDriver, handle: () => TaskHandle | undefined): (signal: NodeJS.Signals) => Promise<void> {
    return async (signal) => {
      const running = handle();
      if (!running || !driver.signalTask) throw new Error(`the ${driver.name} driver cannot signal the task`);
      await driver.signalTask(running, signal);
    };
  }

  /** Inline templates, parsed once (a source file is parsed at each render: it may change). */
  private readonly parsed = new Map<TaskTemplate, GoTemplate>();
  /** What the last start rendered with, which a reload renders with too. */
  private last: TemplateRenderInput | undefined;
  private reloading: Promise<void> = Promise.resolve();

  constructor(
    private readonly templates: readonly TaskTemplate[],
    private readonly log: Logger,
  ) {}

  /**
   * Before a start: every template rendered with the task's environment
   * (`env`) and the node's values (`nodeValues`), both its `${…}` variables
   * and its `env` lookups, and written where its file differs.
   * Returns the variables of its `env = true` templates (a later template
   * wins). Throws a TemplateRenderError naming the template at fault.
   */
  renderForStart(
    env: Readonly<Record<string, string>>,
    target: TemplateTarget,
    nodeValues: Readonly<Record<string, string>> = {},
  ): Record<string, string> {
    this.last = { env: { ...env }, nodeValues: { ...nodeValues }, target };
    const seen = templateEnv(this.last);
    const vars: Record<string, string> = {};
    for (const t of this.templates) {
      try {
        const text = this.render(t, seen, target);
        this.write(t, text, target);
        if (t.env) Object.assign(vars, parseEnvFile(text, t.destination));
      } catch (err) {
        throw asRenderError(t, err);
      }
    }
    return vars;
  }

  /**
   * The agent reloaded its config: each template rendered again (with the
   * env of the last start, or `fallback` for a task re-attached after an
   * agent restart), the files that changed written, and their change_mode
   * applied, unless the task is no longer `actions.live()`. One reload at a
   * time; never throws.
   */
  reload(actions: TemplateChangeActions, fallback: () => TemplateRenderInput): Promise<void> {
    const run = this.reloading.then(() => this.reloadNow(actions, fallback));
    this.reloading = run.catch(() => undefined);
    return this.reloading;
  }

  private async reloadNow(actions: TemplateChangeActions, fallback: () => TemplateRenderInput): Promise<void> {
    // Queued behind another reload, the task may have stopped or restarted (with its own fresh render) meanwhile.
    if (!actions.live()) return;
    const input = (this.last ??= fallback());
    const seen = templateEnv(input);
    const changed: TaskTemplate[] = [];
    for (const t of this.templates) {
      try {
        if (this.write(t, this.render(t, seen, input.target), input.target)) changed.push(t);
      } catch (caught) {
        if (isTransientFsError(caught)) {
          // Says nothing of the template (as at a start, where it is not counted against the task).
          const message = `${errorMessage(asRenderError(t, caught))}: a fault of the agent itself; the task runs on with the file it has`;
          this.log.warn(message, { destination: t.destination });
          actions.event({ type: TEMPLATE_EVENT.notRendered, message });
          continue;
        }
        const reason = `Template failed: ${errorMessage(asRenderError(t, caught))}`;
        this.log.error('a template failed on a reload: the task is killed and fails, as Nomad does', { reason });
        actions.fail(reason);
        return;
      }
    }
    const acting = changed.filter((t) => t.changeMode !== 'noop');
    this.log.info('templates re-rendered on a reload', { changed: changed.map((t) => t.destination) });
    if (!acting.length) return;
    const splay = Math.max(...acting.map((t) => t.splay));
    if (splay > 0) {
      try {
        await actions.sleep(Math.floor(actions.random() * splay));
      } catch {
        return; // the task is stopping
      }
    }
    if (!actions.live()) {
      this.log.info('templates changed, but the task stopped or restarted during the splay: no change_mode applied');
      return;
    }
    if (acting.some((t) => t.changeMode === 'restart')) {
      actions.restart(TEMPLATE_RESTART_REASON);
      return;
    }
    const signals = [...new Set(acting.map((t) => t.changeSignal!))];
    const unsent: string[] = [];
    for (const signal of signals) {
      try {
        await actions.signal(signal);
        actions.event({ type: TEMPLATE_EVENT.signaling, message: `Template re-rendered; sent ${signal}` });
      } catch (err) {
        this.log.error('a template changed, but its change_signal could not be sent', { signal, error: err });
        unsent.push(errorMessage(err));
      }
    }
    // As Nomad: a signal that could not be sent kills the task and fails it.
    if (unsent.length) actions.fail(`Template failed to send signals [${signals.join(' ')}]: ${unsent.join('; ')}`);
  }

  private render(t: TaskTemplate, env: Readonly<Record<string, string>>, target: TemplateTarget): string {
    try {
      let template = this.parsed.get(t);
      if (!template) {
        const text = t.data ?? readSource(t, target);
        template = parseGoTemplate(text, {
          name: JSON.stringify(t.destination),
          leftDelimiter: t.leftDelimiter,
          rightDelimiter: t.rightDelimiter,
        });
        if (t.data !== undefined) this.parsed.set(t, template);
      }
      // `${…}` of the task's variables is replaced in an inline template (as Nomad's HCL does), not in a source file.
      return template.render({ env, ...(t.data !== undefined ? { vars: env } : {}) });
    } catch (err) {
      if (err instanceof GoTemplateError)
        throw new TemplateRenderError(t.destination, `line ${err.line}, column ${err.column}: ${err.reason}`);
      throw err;
    }
  }

  /** Writes the file unless it is already so (content, mode, owner); returns whether it wrote. */
  private write(t: TaskTemplate, text: string, target: TemplateTarget): boolean {
    const [base, rel] = t.destination.startsWith('alloc/')
      ? [target.sharedDir, t.destination.slice('alloc/'.length)]
      : [target.taskDir, t.destination];
    const mode = parseInt(t.perms, 8);
    const uid = t.uid ?? target.owner?.uid;
    const gid = t.gid ?? target.owner?.gid;
    const dirFd = openDirBeneath(base, path.posix.dirname(rel), refuseFor(t.destination), target.owner);
    try {
      const name = path.posix.basename(rel);
      const now = readRegularFile(dirFd, name);
      if (
        now &&
        now.content === text &&
        now.mode === mode &&
        (uid === undefined || now.uid === uid) &&
        (gid === undefined || now.gid === gid)
      )
        return false;
      writeAtomically(t.destination, dirFd, name, text, mode, uid, gid);
      return true;
    } finally {
      fs.closeSync(dirFd);
    }
  }
}

/** A path on the way to a template's file refused (beneath.ts), as a TemplateRenderError naming its destination. */
function refuseFor(destination: string): BeneathRefusal {
  return (problem, kind) =>
    new TemplateRenderError(
      destination,
      kind === 'link' ? `${problem}; the agent writes templates only through real dirs: remove it` : problem,
    );
}

/** What `{{ env "…" }}` and `${…}` see: the task's env and the node's values (a node value wins, as in Nomad's TaskEnv.All()). */
function templateEnv(input: TemplateRenderInput): Record<string, string> {
  return { ...input.env, ...input.nodeValues };
}

/** `err` as a TemplateRenderError naming `t` (its errno code kept: a fault of the agent itself, EMFILE say, is retried uncounted). */
function asRenderError(t: TaskTemplate, err: unknown): TemplateRenderError {
  if (err instanceof TemplateRenderError) return err;
  const wrapped = new TemplateRenderError(t.destination, errorMessage(err));
  const code = (err as { code?: unknown } | null)?.code;
  return Object.assign(wrapped, { cause: err }, typeof code === 'string' ? { code } : {});
}

/**
 * Reads a template's source file, relative to the task dir. A host
 * process's may be any file the agent can read (links followed, as its task
 * could read it too); an isolated task's only one inside its own task dir
 * (alloc/… being the alloc's shared dir), reached through no symlink.
 */
function readSource(t: TaskTemplate, target: TemplateTarget): string {
  const file = path.resolve(target.taskDir, t.source!);
  const notReadable = `source "${t.source}" (${file}) is not a regular file that can be read`;
  if (!target.sandboxed) {
    const read = readRegularFile(fs.openSync(path.dirname(file), O_RDONLY | O_DIRECTORY), path.basename(file), true, true);
    if (!read) throw new TemplateRenderError(t.destination, notReadable);
    return read.content;
  }
  const inside = path.relative(target.taskDir, file);
  if (inside === '' || inside === '..' || inside.startsWith(`..${path.sep}`) || path.isAbsolute(inside))
    throw new TemplateRenderError(
      t.destination,
      `source "${t.source}" is outside the task's own dir (${target.taskDir}): an isolated task's template reads only files in its task dir ` +
        `(Nomad's file sandbox), like local/app.tpl, or alloc/app.tpl for the alloc's shared dir; put the file there, or give the template as data`,
    );
  const [base, rel] =
    inside === 'alloc' || inside.startsWith('alloc/') ? [target.sharedDir, path.relative('alloc', inside)] : [target.taskDir, inside];
  const dirFd = openDirBeneath(base, path.dirname(rel), refuseFor(t.destination), undefined, false);
  const read = readRegularFile(dirFd, path.basename(rel), true);
  if (!read)
    throw new TemplateRenderError(t.destination, `${notReadable}, or it is a symlink (an isolated task's template reads through none)`);
  return read.content;
}

/**
 * The file `name` in the dir `dirFd` if it is a regular file (not a FIFO or
 * dir, nor a link unless `follow`) no bigger than a template may be.
 * `closeDir`: the dir's fd is closed here too.
 */
function readRegularFile(
  dirFd: number,
  name: string,
  closeDir = false,
  follow = false,
): { content: string; mode: number; uid: number; gid: number } | undefined {
  let fd: number;
  try {
    fd = fs.openSync(`/proc/self/fd/${dirFd}/${name}`, O_RDONLY | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW));
  } catch {
    return undefined;
  } finally {
    if (closeDir) fs.closeSync(dirFd);
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile() || st.size > GO_TEMPLATE_LIMITS.maxOutputChars * 4) return undefined;
    return { content: fs.readFileSync(fd, 'utf8'), mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
  } finally {
    fs.closeSync(fd);
  }
}

/** A temporary file in the same dir, its mode and owner set, fsynced, then renamed over `name`; the dir fsynced after. */
function writeAtomically(destination: string, dirFd: number, name: string, text: string, mode: number, uid?: number, gid?: number): void {
  const tmp = `/proc/self/fd/${dirFd}/.${name}.${randomBytes(6).toString('hex')}.tmp`;
  const fd = fs.openSync(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
  try {
    try {
      fs.writeFileSync(fd, text);
      if (uid !== undefined || gid !== undefined) fs.fchownSync(fd, uid ?? -1, gid ?? -1);
      fs.fchmodSync(fd, mode);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, `/proc/self/fd/${dirFd}/${name}`);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw new TemplateRenderError(destination, `could not be written: ${errorMessage(err)}`);
  }
  fs.fsyncSync(dirFd);
}

/**
 * A rendered `env = true` file as variables, read as Nomad reads it
 * (go-envparse): KEY=VALUE lines, blank lines and `#` comments skipped, an
 * optional `export `, values unquoted (trimmed, a ` #` comment cut), in
 * single quotes (as written) or double quotes (with \n \t \" \\ escapes).
 */
export function parseEnvFile(text: string, destination: string): Record<string, string> {
  const vars = new Map<string, string>();
  const lines = text.split(/\r?\n/);
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const fail = (why: string): never => {
      throw new TemplateRenderError(destination, `env = true, but line ${i + 1} of the rendered file ${why}; each line must be KEY=VALUE`);
    };
    const m = /^(?:export\s+)?([^=\s]+)\s*=\s*(.*)$/.exec(line);
    if (!m) return fail(`(${JSON.stringify(raw.length > 60 ? `${raw.slice(0, 60)}…` : raw)}) has no "="`);
    const [, key, rest] = m as unknown as [string, string, string];
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key))
      fail(`names "${key}", which is not a variable name (letters, digits and _, not starting with a digit)`);
    let value: string;
    if (rest.startsWith("'")) {
      const end = rest.indexOf("'", 1);
      if (end < 0) fail('has an unclosed single quote');
      value = rest.slice(1, end);
    } else if (rest.startsWith('"')) {
      const q = /^"((?:[^"\\]|\\.)*)"/.exec(rest);
      if (!q) return fail('has an unclosed double quote');
      value = q[1]!.replace(/\\(.)/g, (_s, c: string) => ({ n: '\n', t: '\t', r: '\r' })[c] ?? c);
    } else value = rest.replace(/\s+#.*$/, '').trim();
    vars.set(key, value);
  }
  // fromEntries defines own properties: a KEY like __proto__ stays data.
  return Object.fromEntries(vars);
}
