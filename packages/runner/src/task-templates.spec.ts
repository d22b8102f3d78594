// A task's templates on a real file system: rendered and written atomically
// with their perms and owner, an env file read as Nomad reads it, no symlink
// a task planted taking the agent's write (or read) out of the task's dirs,
// and a reload that writes only what changed and applies its change_mode.
import { MemoryLogger } from '@csiplug/core';
import { DEFAULT_TEMPLATE, type TaskTemplate } from '@csiplug/jobspec';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import {
  TEMPLATE_EVENT,
  TEMPLATE_RESTART_REASON,
  TaskTemplates,
  TemplateRenderError,
  parseEnvFile,
  templateTarget,
  type TemplateChangeActions,
  type TemplateTarget,
} from './task-templates';

// fs.openSync passes through to the real one; a test makes one call fail as a fault of the agent itself would.
jest.mock('fs', () => {
  const actual = jest.requireActual<typeof fs>('fs');
  return { ...actual, openSync: jest.fn(actual.openSync) };
});

const template = (over: Partial<TaskTemplate>): TaskTemplate => ({ ...DEFAULT_TEMPLATE, splay: 0, destination: 'local/app.conf', ...over });

describe('TaskTemplates', () => {
  let root: string;
  let allocDir: string;
  let taskDir: string;
  let outside: string;
  let host: TemplateTarget;
  let log: MemoryLogger;

  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-templates-'));
    allocDir = path.join(root, 'allocs', 'a1');
    taskDir = path.join(allocDir, 'web');
    outside = path.join(root, 'outside');
    for (const d of [path.join(taskDir, 'local'), path.join(taskDir, 'secrets'), path.join(allocDir, 'alloc'), outside])
      fs.mkdirSync(d, { recursive: true });
    host = templateTarget(taskDir, undefined);
    log = new MemoryLogger();
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  const read = (rel: string) => fs.readFileSync(path.join(taskDir, rel), 'utf8');
  const renderError = (templates: TaskTemplate[], env: Record<string, string> = {}, target = host): TemplateRenderError => {
    try {
      new TaskTemplates(templates, log).renderForStart(env, target);
    } catch (err) {
      expect(err).toBeInstanceOf(TemplateRenderError);
      return err as TemplateRenderError;
    }
    throw new Error('rendered');
  };

  it('renders data with the env and the ${…} variables, writes it with its perms, and makes missing dirs', () => {
    const t = new TaskTemplates(
      [template({ data: 'node={{ env "NODE" }} alloc=${NOMAD_ALLOC_ID}\n', destination: 'local/conf/deep/app.conf', perms: '0640' })],
      log,
    );
    expect(t.renderForStart({ NODE: 'n1', NOMAD_ALLOC_ID: 'a1' }, host)).toEqual({});
    expect(read('local/conf/deep/app.conf')).toBe('node=n1 alloc=a1\n');
    expect(fs.statSync(path.join(taskDir, 'local/conf/deep/app.conf')).mode & 0o7777).toBe(0o640);
    // No temporary file is left beside it.
    expect(fs.readdirSync(path.join(taskDir, 'local/conf/deep'))).toEqual(['app.conf']);
  });

  it("writes a destination under alloc/ into the alloc's shared dir", () => {
    new TaskTemplates([template({ data: 'shared', destination: 'alloc/shared.txt' })], log).renderForStart({}, host);
    expect(fs.readFileSync(path.join(allocDir, 'alloc', 'shared.txt'), 'utf8')).toBe('shared');
  });

  it('reads a source file relative to the task dir (no ${…} in it), with its own delimiters', () => {
    fs.writeFileSync(path.join(taskDir, 'local', 'app.tpl'), 'v=[[ env "V" ]] ${NOT_REPLACED} {{ kept }}');
    new TaskTemplates([template({ source: 'local/app.tpl', leftDelimiter: '[[', rightDelimiter: ']]' })], log).renderForStart(
      { V: '1' },
      host,
    );
    expect(read('local/app.conf')).toBe('v=1 ${NOT_REPLACED} {{ kept }}');
  });

  it("a host process's source may be any file the agent reads, through a link too", () => {
    fs.writeFileSync(path.join(outside, 'real.tpl'), 'via {{ "link" }}');
    fs.symlinkSync(path.join(outside, 'real.tpl'), path.join(outside, 'link.tpl'));
    new TaskTemplates([template({ source: path.join(outside, 'link.tpl') })], log).renderForStart({}, host);
    expect(read('local/app.conf')).toBe('via link');
  });

  it("owns the file as the template says, else as the isolated task's user, and new dirs as that user", () => {
    const isolated = templateTarget(taskDir, { allocDir: path.join(allocDir, 'alloc'), user: { uid: 65534, gid: 65534 } } as never);
    const t = new TaskTemplates(
      [template({ data: 'a', destination: 'local/sub/a.conf' }), template({ data: 'b', destination: 'secrets/b', uid: 1234, gid: 2345 })],
      log,
    );
    t.renderForStart({}, isolated);
    expect(fs.statSync(path.join(taskDir, 'local/sub/a.conf'))).toMatchObject({ uid: 65534, gid: 65534 });
    expect(fs.statSync(path.join(taskDir, 'local/sub'))).toMatchObject({ uid: 65534, gid: 65534 });
    expect(fs.statSync(path.join(taskDir, 'secrets/b'))).toMatchObject({ uid: 1234, gid: 2345 });
  });

  it('gives the variables of env templates, a later one winning', () => {
    const t = new TaskTemplates(
      [
        template({ data: 'A=1\nB="two\\nlines"\n', destination: 'secrets/one.env', env: true }),
        template({ data: "# comment\n\nexport B='2 #kept'\nC = three # cut\n", destination: 'secrets/two.env', env: true }),
        template({ data: 'NOT=an env file', destination: 'local/plain' }),
      ],
      log,
    );
    expect(t.renderForStart({}, host)).toEqual({ A: '1', B: '2 #kept', C: 'three' });
  });

  it('reads env files as KEY=VALUE lines and names the line that is not one', () => {
    expect(parseEnvFile('__proto__=x\n', 'secrets/e')).toEqual(Object.fromEntries([['__proto__', 'x']]));
    expect(() => parseEnvFile('A=1\njust text\n', 'secrets/e')).toThrow(
      'template "secrets/e": env = true, but line 2 of the rendered file ("just text") has no "="; each line must be KEY=VALUE',
    );
    expect(() => parseEnvFile('1A=x', 'secrets/e')).toThrow(/names "1A", which is not a variable name/);
    expect(() => parseEnvFile('A="open', 'secrets/e')).toThrow(/unclosed double quote/);
  });

  it('a render error names the template and its line', () => {
    expect(renderError([template({ data: 'a\n${NOPE}' })]).message).toMatch(
      /^template "local\/app.conf": line 2, column 1: \$\{NOPE\} is not a variable of this task/,
    );
    expect(renderError([template({ source: 'local/missing.tpl' })]).message).toMatch(
      /^template "local\/app.conf": source "local\/missing.tpl" .* is not a regular file/,
    );
  });

  describe('symlinks a task planted', () => {
    it('a symlinked dir on the way is refused; nothing is written where it points', () => {
      fs.symlinkSync(outside, path.join(taskDir, 'local', 'sub'));
      const err = renderError([template({ data: 'x', destination: 'local/sub/evil.conf' })]);
      expect(err.message).toBe(
        `template "local/sub/evil.conf": ${path.join(taskDir, 'local', 'sub')} is a symlink or not a dir; the agent writes templates only through real dirs: remove it`,
      );
      expect(fs.readdirSync(outside)).toEqual([]);
    });

    it('a symlinked top dir (local itself) is refused too', () => {
      fs.rmSync(path.join(taskDir, 'local'), { recursive: true });
      fs.symlinkSync(outside, path.join(taskDir, 'local'));
      expect(renderError([template({ data: 'x' })]).message).toMatch(/local is a symlink or not a dir/);
      expect(fs.readdirSync(outside)).toEqual([]);
    });

    it('a symlink at the destination is replaced by the file, never written through', () => {
      const victim = path.join(outside, 'victim');
      fs.writeFileSync(victim, 'precious');
      fs.symlinkSync(victim, path.join(taskDir, 'local', 'app.conf'));
      new TaskTemplates([template({ data: 'rendered' })], log).renderForStart({}, host);
      expect(fs.readFileSync(victim, 'utf8')).toBe('precious');
      expect(fs.lstatSync(path.join(taskDir, 'local', 'app.conf')).isFile()).toBe(true);
      expect(read('local/app.conf')).toBe('rendered');
    });

    it('a FIFO at the destination does not block the agent: it is replaced', () => {
      const fifo = path.join(taskDir, 'local', 'app.conf');
      execFileSync('mkfifo', [fifo]);
      new TaskTemplates([template({ data: 'rendered' })], log).renderForStart({}, host);
      expect(read('local/app.conf')).toBe('rendered');
    });

    it("an isolated task's source must be in its own task dir (alloc/ there the shared dir) and reached through no symlink", () => {
      const isolated = templateTarget(taskDir, { allocDir: path.join(allocDir, 'alloc') } as never);
      fs.writeFileSync(path.join(outside, 'secret.tpl'), 'secret');
      expect(renderError([template({ source: path.join(outside, 'secret.tpl') })], {}, isolated).message).toMatch(
        /source ".*secret.tpl" is outside the task's own dir .*Nomad's file sandbox/,
      );
      // A sibling task's secrets, in the same alloc dir, are not its to read.
      fs.mkdirSync(path.join(allocDir, 'db', 'secrets'), { recursive: true });
      fs.writeFileSync(path.join(allocDir, 'db', 'secrets', 'token'), 'db-token');
      expect(renderError([template({ source: '../db/secrets/token' })], {}, isolated).message).toMatch(
        /source "..\/db\/secrets\/token" is outside the task's own dir/,
      );
      // alloc/ is the alloc's shared dir, as the task sees it.
      fs.writeFileSync(path.join(allocDir, 'alloc', 'shared.tpl'), 'shared');
      new TaskTemplates([template({ source: 'alloc/shared.tpl', destination: 'local/shared' })], log).renderForStart({}, isolated);
      expect(read('local/shared')).toBe('shared');
      fs.symlinkSync(path.join(outside, 'secret.tpl'), path.join(taskDir, 'local', 'link.tpl'));
      expect(renderError([template({ source: 'local/link.tpl' })], {}, isolated).message).toMatch(
        /is not a regular file that can be read, or it is a symlink/,
      );
      fs.symlinkSync(outside, path.join(taskDir, 'local', 'linkdir'));
      expect(renderError([template({ source: 'local/linkdir/secret.tpl' })], {}, isolated).message).toMatch(
        /linkdir is a symlink or not a dir/,
      );
      // Inside the alloc dir it is read.
      fs.writeFileSync(path.join(taskDir, 'local', 'ok.tpl'), 'ok');
      new TaskTemplates([template({ source: 'local/ok.tpl' })], log).renderForStart({}, isolated);
      expect(read('local/app.conf')).toBe('ok');
    });
  });

  describe('reload', () => {
    let calls: string[];
    let sleeps: number[];
    const actions = (): TemplateChangeActions => ({
      restart: (reason) => void calls.push(`restart: ${reason}`),
      fail: (reason) => void calls.push(`fail: ${reason}`),
      signal: async (signal) => void calls.push(`signal ${signal}`),
      event: (e) => void calls.push(`event ${e.type}: ${e.message}`),
      sleep: async (ms) => void sleeps.push(ms),
      random: () => 0.5,
      live: () => true,
    });
    const noFallback = () => {
      throw new Error('the last start is known');
    };
    beforeEach(() => {
      calls = [];
      sleeps = [];
    });

    it('does nothing when no file changed', async () => {
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v1');
      const t = new TaskTemplates([template({ source: 'local/in.tpl' })], log);
      t.renderForStart({}, host);
      await t.reload(actions(), noFallback);
      expect(calls).toEqual([]);
    });

    it('a changed restart template restarts the task after a random part of the largest splay; restart wins over signals', async () => {
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v1');
      const t = new TaskTemplates(
        [
          template({ source: 'local/in.tpl', splay: 4_000 }),
          template({ source: 'local/in.tpl', destination: 'local/b', changeMode: 'signal', changeSignal: 'SIGHUP', splay: 10_000 }),
        ],
        log,
      );
      t.renderForStart({}, host);
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v2');
      await t.reload(actions(), noFallback);
      expect(read('local/app.conf')).toBe('v2');
      expect(read('local/b')).toBe('v2');
      expect(sleeps).toEqual([5_000]);
      expect(calls).toEqual([`restart: ${TEMPLATE_RESTART_REASON}`]);
    });

    it('changed signal templates send each signal once; noop only writes', async () => {
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v1');
      const t = new TaskTemplates(
        [
          template({ source: 'local/in.tpl', destination: 'local/a', changeMode: 'signal', changeSignal: 'SIGHUP' }),
          template({ source: 'local/in.tpl', destination: 'local/b', changeMode: 'signal', changeSignal: 'SIGHUP' }),
          template({ source: 'local/in.tpl', destination: 'local/c', changeMode: 'noop' }),
          template({ data: 'fixed', destination: 'local/d', changeMode: 'signal', changeSignal: 'SIGUSR1' }),
        ],
        log,
      );
      t.renderForStart({}, host);
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v2');
      await t.reload(actions(), noFallback);
      expect(calls).toEqual(['signal SIGHUP', `event ${TEMPLATE_EVENT.signaling}: Template re-rendered; sent SIGHUP`]);
      expect(read('local/c')).toBe('v2');
    });

    it('a noop change only writes the file', async () => {
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v1');
      const t = new TaskTemplates([template({ source: 'local/in.tpl', changeMode: 'noop' })], log);
      t.renderForStart({}, host);
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v2');
      await t.reload(actions(), noFallback);
      expect(calls).toEqual([]);
      expect(read('local/app.conf')).toBe('v2');
    });

    it('a template that no longer renders kills the task and fails it (as Nomad), leaving the file it had', async () => {
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v1');
      const t = new TaskTemplates([template({ source: 'local/in.tpl' })], log);
      t.renderForStart({}, host);
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), '{{ key "x" }}');
      await t.reload(actions(), noFallback);
      expect(calls).toEqual([
        `fail: Template failed: template "local/app.conf": line 1, column 4: function "key" reads Consul, which csiplug does not use; put the value in the task's env and read it with {{ env "NAME" }}`,
      ]);
      expect(read('local/app.conf')).toBe('v1');
    });

    it('a re-render a fault of the agent itself stops (EMFILE) is an event; the task runs on with the file it has', async () => {
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v1');
      const t = new TaskTemplates([template({ source: 'local/in.tpl' })], log);
      t.renderForStart({}, host);
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v2');
      jest.mocked(fs.openSync).mockImplementationOnce(() => {
        throw Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' });
      });
      await t.reload(actions(), noFallback);
      expect(calls).toEqual([
        `event ${TEMPLATE_EVENT.notRendered}: template "local/app.conf": EMFILE: too many open files: a fault of the agent itself; the task runs on with the file it has`,
      ]);
      expect(read('local/app.conf')).toBe('v1');
    });

    it('a task this runner did not start (re-attached) renders with the env it is given', async () => {
      fs.writeFileSync(path.join(taskDir, 'local', 'app.conf'), 'old');
      const t = new TaskTemplates([template({ data: 'v={{ env "V" }}' })], log);
      await t.reload(actions(), () => ({ env: { V: 'now' }, nodeValues: {}, target: host }));
      expect(read('local/app.conf')).toBe('v=now');
      expect(calls).toEqual([`restart: ${TEMPLATE_RESTART_REASON}`]);
    });

    it('a task no longer live (stopped or restarted) before the render or after the splay gets nothing', async () => {
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v1');
      const t = new TaskTemplates([template({ source: 'local/in.tpl', changeMode: 'signal', changeSignal: 'SIGHUP', splay: 1_000 })], log);
      t.renderForStart({}, host);
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v2');
      await t.reload({ ...actions(), live: () => false }, noFallback);
      expect(read('local/app.conf')).toBe('v1'); // not rendered: its next start renders
      let live = true;
      await t.reload({ ...actions(), live: () => live, sleep: async () => void (live = false) }, noFallback);
      expect(read('local/app.conf')).toBe('v2');
      expect(calls).toEqual([]);
    });

    it("renders with the node's values in ${…} and env lookups (a node value wins), on a start and a reload", async () => {
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), '{{ env "node.unique.name" }}');
      const t = new TaskTemplates(
        [template({ data: '${attr.unique.hostname} {{ env "meta.rack" }}' }), template({ source: 'local/in.tpl', destination: 'local/b' })],
        log,
      );
      expect(t.renderForStart({ A: '1' }, host, { 'attr.unique.hostname': 'h1', 'meta.rack': 'r1', 'node.unique.name': 'n1' })).toEqual({});
      expect(read('local/app.conf')).toBe('h1 r1');
      expect(read('local/b')).toBe('n1');
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v2 {{ env "node.unique.name" }}');
      await t.reload(actions(), noFallback);
      expect(read('local/b')).toBe('v2 n1');
    });

    it('a signal that cannot be sent kills the task and fails it (as Nomad), after the signals that could be sent', async () => {
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v1');
      const t = new TaskTemplates(
        [
          template({ source: 'local/in.tpl', changeMode: 'signal', changeSignal: 'SIGHUP' }),
          template({ source: 'local/in.tpl', destination: 'local/b', changeMode: 'signal', changeSignal: 'SIGUSR1' }),
        ],
        log,
      );
      t.renderForStart({}, host);
      fs.writeFileSync(path.join(taskDir, 'local', 'in.tpl'), 'v2');
      const signal = async (s: NodeJS.Signals) =>
        s === 'SIGHUP' ? Promise.reject(new Error('the task is not running')) : void calls.push(`signal ${s}`);
      await t.reload({ ...actions(), signal }, noFallback);
      expect(calls).toEqual([
        'signal SIGUSR1',
        `event ${TEMPLATE_EVENT.signaling}: Template re-rendered; sent SIGUSR1`,
        'fail: Template failed to send signals [SIGHUP SIGUSR1]: the task is not running',
      ]);
    });
  });
});
