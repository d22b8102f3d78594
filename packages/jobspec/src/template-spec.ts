// A task's `template` blocks, as Nomad's (api.Template / structs.Template):
// read and checked here, with Nomad's names and defaults, the template text
// parsed with go-template.ts so that a function outside csiplug's subset is
// refused now, not when the task starts. readTask only calls readTemplates.
import * as os from 'os';
import * as path from 'path';
import type { BlockReader, Where } from './document';
import { BlockReader as Reader } from './document';
import { GoTemplateError, parseGoTemplate } from './go-template';
import type { TaskSpec, TaskTemplate } from './model';

/** Nomad's defaults (api.Template.Canonicalize). */
export const DEFAULT_TEMPLATE = Object.freeze({
  perms: '0644',
  changeMode: 'restart' as const,
  leftDelimiter: '{{',
  rightDelimiter: '}}',
  splay: 5_000,
  env: false,
  errorOnMissingKey: false,
});

/** The JSON form of a template block (Nomad's field names). */
export interface TemplateDocument {
  data?: string;
  source?: string;
  destination: string;
  perms?: string;
  uid?: number;
  gid?: number;
  env?: boolean;
  change_mode?: 'restart' | 'signal' | 'noop';
  change_signal?: string;
  left_delimiter?: string;
  right_delimiter?: string;
  splay?: string | number;
  error_on_missing_key?: boolean;
}

const TEMPLATE_FIELDS = [
  'data',
  'source',
  'destination',
  'perms',
  'uid',
  'gid',
  'env',
  'change_mode',
  'change_signal',
  'left_delimiter',
  'right_delimiter',
  'splay',
  'error_on_missing_key',
];

export const TEMPLATE_UNSUPPORTED: Readonly<Record<string, string>> = {
  change_script: 'csiplug runs no scripts on a change: use change_mode = "signal" (the task reloads itself) or "restart"; remove it',
  wait: 'csiplug renders when the task starts and on a SIGHUP of the agent, never on a Consul or Vault change, so there is nothing to wait for; remove it',
  vault_grace: 'csiplug does not use Vault; remove it',
  once:
    'csiplug renders a template at every start of the task and on a SIGHUP of the agent; it has no render-once mode. ' +
    'Remove it (with change_mode = "noop" a new render never signals or restarts the task)',
};

/** Nomad's `${NOMAD_*_DIR}` at the start of a destination, as the task dir's own names. */
const DIR_VARIABLES: ReadonlyArray<[string, string]> = [
  ['${NOMAD_TASK_DIR}', 'local'],
  ['${NOMAD_SECRETS_DIR}', 'secrets'],
  ['${NOMAD_ALLOC_DIR}', 'alloc'],
];

/** The dirs of its own an isolated task sees (the rest of its task dir is the agent's). */
const ISOLATED_DIRS = ['local', 'secrets', 'alloc'];

const SIGNALS = new Set(Object.keys(os.constants.signals));

/** The task's `template` blocks; each problem reported under `template` (or `template[i]`). */
export function readTemplates(r: BlockReader, where: Where, driver: TaskSpec['driver'] | undefined): TaskTemplate[] {
  const templates: TaskTemplate[] = [];
  const destinations = new Set<string>();
  for (const { body, field, at } of r.blockList('template')) {
    const t = where.guard(
      () => readTemplate(new Reader(body, where.block(field, at), TEMPLATE_FIELDS, TEMPLATE_UNSUPPORTED), driver, destinations),
      undefined,
      at,
    );
    if (t) templates.push(t);
  }
  return templates;
}

function readTemplate(m: BlockReader, driver: TaskSpec['driver'] | undefined, destinations: Set<string>): TaskTemplate {
  const destination = readTemplateDestination(m, driver);
  if (destination && destinations.has(destination))
    m.report('destination', `"${destination}" is already the destination of another template of this task; give each its own file`);
  destinations.add(destination);

  const data = m.has('data') ? m.string('data', '') : undefined;
  const source = m.has('source') ? m.string('source', '') : undefined;
  if (data !== undefined && source !== undefined)
    m.report('source', 'cannot be given with data: the template is either inline (data) or in a file (source), not both');
  else if (data === undefined && source === undefined)
    m.where.reportObject('needs data (the template itself) or source (a file on this node that holds it)', m.at('data'));
  if (source !== undefined) {
    if (source === '') m.report('source', 'is empty; name the file that holds the template');
    else if (source.includes('\0')) m.report('source', 'may not contain NUL');
    else if (source.includes('${'))
      m.report('source', `"${source}" may not use \${…}: give the path as it is (absolute, or relative to the task dir)`);
    else if (driver !== undefined && driver !== 'raw_exec') {
      // An isolated task's template reads only its own task dir and the alloc's shared alloc/ (task-templates.ts).
      const normal = path.posix.normalize(source);
      if (normal.startsWith('/') || normal === '..' || normal.startsWith('../'))
        m.report(
          'source',
          `"${source}" is outside what an isolated (${driver}) task's template may read: its own task dir, given relative to it ` +
            `(like "local/app.tpl", or "alloc/app.tpl" for the alloc's shared dir); put the file there (an artifact does), or give the template as data`,
        );
    }
  }

  const perms = m.string('perms', DEFAULT_TEMPLATE.perms);
  if (!/^[0-7]{1,4}$/.test(perms)) m.report('perms', `"${perms}" is not an octal file mode like "0644" or "0600"`);
  // Nomad reads perms into an os.FileMode, which has no setuid, setgid or sticky bit: refused rather than dropped unsaid.
  else if (parseInt(perms, 8) & 0o7000)
    m.report(
      'perms',
      `"${perms}" has a setuid, setgid or sticky bit, which a template file does not get (nor in Nomad); give the permission bits only, like "0755"`,
    );
  const uid = m.has('uid') ? m.int('uid', 0, 0, 0xfffffffe) : undefined;
  const gid = m.has('gid') ? m.int('gid', 0, 0, 0xfffffffe) : undefined;
  const env = m.bool('env', DEFAULT_TEMPLATE.env);

  let changeMode: TaskTemplate['changeMode'] = DEFAULT_TEMPLATE.changeMode;
  if (m.raw('change_mode') === 'script')
    m.report(
      'change_mode',
      '"script" is not supported: csiplug runs no change scripts; use "signal" (the task reloads itself), "restart" or "noop"',
    );
  else changeMode = m.oneOf('change_mode', ['restart', 'signal', 'noop'] as const, DEFAULT_TEMPLATE.changeMode);
  let changeSignal: NodeJS.Signals | undefined;
  if (m.has('change_signal')) {
    const raw = m.string('change_signal', '');
    const upper = raw.toUpperCase();
    const name = upper.startsWith('SIG') ? upper : `SIG${upper}`;
    if (!SIGNALS.has(name)) m.report('change_signal', `"${raw}" is not a signal; name one like SIGHUP or SIGUSR1`);
    else changeSignal = name as NodeJS.Signals;
  } else if (changeMode === 'signal') changeSignal = 'SIGHUP'; // Nomad's default (api.Template.Canonicalize)
  if (env && changeMode === 'signal')
    m.report(
      'change_mode',
      'cannot use signals with env var templates (env = true), as in Nomad: new variables reach the task only when it starts again; ' +
        'use change_mode = "restart" (or "noop")',
    );

  const leftDelimiter = m.string('left_delimiter', DEFAULT_TEMPLATE.leftDelimiter);
  const rightDelimiter = m.string('right_delimiter', DEFAULT_TEMPLATE.rightDelimiter);
  for (const [key, value] of [
    ['left_delimiter', leftDelimiter],
    ['right_delimiter', rightDelimiter],
  ] as const)
    if (value === '' || /\s/.test(value))
      m.report(key, `${JSON.stringify(value)} is not a delimiter: give one without white space, like "[["`);
  const splay = m.duration('splay', DEFAULT_TEMPLATE.splay);
  if (splay < 0) m.report('splay', 'may not be negative');
  const errorOnMissingKey = m.bool('error_on_missing_key', DEFAULT_TEMPLATE.errorOnMissingKey);

  // The template is parsed now: a function, field or action csiplug does not render is refused with its line.
  if (data && !m.failed('left_delimiter') && !m.failed('right_delimiter')) {
    try {
      parseGoTemplate(data, { name: JSON.stringify(destination), leftDelimiter, rightDelimiter });
    } catch (err) {
      if (!(err instanceof GoTemplateError)) throw err;
      m.report('data', `is not a template csiplug renders: ${err.message}`);
    }
  }

  return {
    ...(data !== undefined ? { data } : {}),
    ...(source !== undefined ? { source } : {}),
    destination,
    perms,
    ...(uid !== undefined ? { uid } : {}),
    ...(gid !== undefined ? { gid } : {}),
    env,
    changeMode,
    ...(changeSignal ? { changeSignal } : {}),
    leftDelimiter,
    rightDelimiter,
    splay,
    errorOnMissingKey,
  };
}

/**
 * Where the file goes, relative to the task dir and normalised: Nomad's
 * `${NOMAD_TASK_DIR}`, `${NOMAD_SECRETS_DIR}` and `${NOMAD_ALLOC_DIR}` at its
 * start read as local/, secrets/ and alloc/; it may not climb out (`..`), and
 * an isolated task's must be in a dir it sees.
 */
function readTemplateDestination(m: BlockReader, driver: TaskSpec['driver'] | undefined): string {
  const raw = m.requiredString('destination');
  if (!raw) return '';
  let dest = raw;
  for (const [variable, dir] of DIR_VARIABLES) if (dest.startsWith(variable)) dest = dir + dest.slice(variable.length);
  const problem = dest.includes('\0')
    ? 'may not contain NUL'
    : dest.includes('${')
      ? `"${raw}" may use only \${NOMAD_TASK_DIR}, \${NOMAD_SECRETS_DIR} or \${NOMAD_ALLOC_DIR}, at its start; write the rest of the path as it is`
      : dest.startsWith('/')
        ? `"${raw}" must be relative to the task dir, like "local/app.conf" or "secrets/token"`
        : dest.split(/[\\/]/).includes('..')
          ? `"${raw}" may not contain "..": a template is written inside the task's own dirs`
          : dest.endsWith('/')
            ? `"${raw}" names a dir; name the file to write`
            : undefined;
  if (problem) {
    m.report('destination', problem);
    return raw;
  }
  const normal = path.posix.normalize(dest);
  if (normal === '.' || normal === 'local' || normal === 'secrets' || normal === 'alloc')
    m.report('destination', `"${raw}" names a dir; name the file to write, like "local/app.conf"`);
  else if (driver !== undefined && driver !== 'raw_exec' && !ISOLATED_DIRS.includes(normal.split('/')[0]!))
    m.report(
      'destination',
      `"${raw}" is outside what an isolated (${driver}) task sees of its dirs: write it under local/, secrets/ or alloc/`,
    );
  return normal;
}

/** The JSON form of one template, every field explicit (validateJob reads it back as it was). */
export function templateToDocument(t: TaskTemplate): TemplateDocument {
  return {
    ...(t.data !== undefined ? { data: t.data } : {}),
    ...(t.source !== undefined ? { source: t.source } : {}),
    destination: t.destination,
    perms: t.perms,
    ...(t.uid !== undefined ? { uid: t.uid } : {}),
    ...(t.gid !== undefined ? { gid: t.gid } : {}),
    env: t.env,
    change_mode: t.changeMode,
    ...(t.changeSignal !== undefined ? { change_signal: t.changeSignal } : {}),
    left_delimiter: t.leftDelimiter,
    right_delimiter: t.rightDelimiter,
    splay: t.splay,
    error_on_missing_key: t.errorOnMissingKey,
  };
}
