// A task's template blocks: Nomad's fields and defaults, the checks made
// when the jobspec is read (the template parsed, its destination kept in
// the task's dirs), and the trip through jobToDocument.
import { ValidationError } from '@csiplug/core';
import { diffGroup, isDestructive } from './job-diff';
import { jobToDocument, parseJobspec, validateJob } from './jobspec';
import type { TaskSpec } from './model';

const TASK = 'job "web" group "app" task "server"';

/** A job of one task with `task` merged into it and `template` as its template block(s). */
function job(template: unknown, task: Record<string, unknown> = {}): unknown {
  return {
    job: { web: { group: { app: { task: { server: { driver: 'exec', config: { command: '/bin/true' }, template, ...task } } } } } },
  };
}

const taskOf = (doc: unknown): TaskSpec => validateJob(doc).groups[0]!.tasks[0]!;

function problems(doc: unknown): string[] {
  try {
    validateJob(doc);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as ValidationError).message.split('\n');
  }
  throw new Error('expected a ValidationError');
}

describe('template blocks', () => {
  it("reads an HCL template with Nomad's defaults, and keeps it through jobToDocument", async () => {
    const hcl = `
job "web" {
  group "app" {
    task "server" {
      driver = "exec"
      config {
        command = "/bin/app"
      }
      template {
        data        = <<EOT
node={{ env "CSIPLUG_NODE_ID" }}
alloc=\${NOMAD_ALLOC_ID}
EOT
        destination = "local/app.conf"
      }
      template {
        source          = "/etc/app/env.tpl"
        destination     = "\${NOMAD_SECRETS_DIR}/app.env"
        env             = true
        perms           = "0600"
        uid             = 1000
        gid             = 1001
        change_mode     = "signal"
        change_signal   = "sighup"
        left_delimiter  = "[["
        right_delimiter = "]]"
        splay           = "10s"
        error_on_missing_key = true
      }
    }
  }
}
`;
    const spec = await parseJobspec(hcl, 'web.hcl');
    const task = spec.groups[0]!.tasks[0]!;
    expect(task.templates).toEqual([
      {
        data: 'node={{ env "CSIPLUG_NODE_ID" }}\nalloc=${NOMAD_ALLOC_ID}\n',
        destination: 'local/app.conf',
        perms: '0644',
        env: false,
        changeMode: 'restart',
        leftDelimiter: '{{',
        rightDelimiter: '}}',
        splay: 5_000,
        errorOnMissingKey: false,
      },
      {
        source: '/etc/app/env.tpl',
        destination: 'secrets/app.env',
        perms: '0600',
        uid: 1000,
        gid: 1001,
        env: true,
        changeMode: 'signal',
        changeSignal: 'SIGHUP',
        leftDelimiter: '[[',
        rightDelimiter: ']]',
        splay: 10_000,
        errorOnMissingKey: true,
      },
    ]);
    const doc = jobToDocument(spec);
    expect(doc.job.web!.group.app!.task.server!.template).toHaveLength(2);
    expect(validateJob(doc)).toEqual(spec);
    expect(validateJob(JSON.parse(JSON.stringify(doc)))).toEqual(spec);
  });

  it('a task without templates has none in its spec or its document', () => {
    const task = taskOf(job(undefined));
    expect(task.templates).toBeUndefined();
    expect(jobToDocument(validateJob(job(undefined))).job.web!.group.app!.task.server!.template).toBeUndefined();
  });

  it('normalises the destination; NOMAD_*_DIR at its start reads as the dir it names', () => {
    const dest = (d: string) => taskOf(job({ data: 'x', destination: d })).templates![0]!.destination;
    expect(dest('local//a/./b.conf')).toBe('local/a/b.conf');
    expect(dest('${NOMAD_TASK_DIR}/a.conf')).toBe('local/a.conf');
    expect(dest('${NOMAD_ALLOC_DIR}/shared.conf')).toBe('alloc/shared.conf');
    // A host process sees its whole task dir.
    expect(taskOf(job({ data: 'x', destination: 'conf/app.conf' }, { driver: 'raw_exec' })).templates![0]!.destination).toBe(
      'conf/app.conf',
    );
  });

  it.each<[string, unknown, string]>([
    [
      'neither data nor source',
      { destination: 'local/x' },
      `${TASK}: template needs data (the template itself) or source (a file on this node that holds it)`,
    ],
    [
      'both data and source',
      { data: 'x', source: '/x', destination: 'local/x' },
      `${TASK}: template.source cannot be given with data: the template is either inline (data) or in a file (source), not both`,
    ],
    ['no destination', { data: 'x' }, `${TASK}: template.destination is required`],
    [
      'a destination that climbs out',
      { data: 'x', destination: 'local/../../etc/passwd' },
      `${TASK}: template.destination "local/../../etc/passwd" may not contain "..": a template is written inside the task's own dirs`,
    ],
    [
      'an absolute destination',
      { data: 'x', destination: '/etc/passwd' },
      `${TASK}: template.destination "/etc/passwd" must be relative to the task dir, like "local/app.conf" or "secrets/token"`,
    ],
    [
      'another variable in the destination',
      { data: 'x', destination: 'local/${NOMAD_ALLOC_ID}.conf' },
      `${TASK}: template.destination "local/\${NOMAD_ALLOC_ID}.conf" may use only \${NOMAD_TASK_DIR}, \${NOMAD_SECRETS_DIR} or \${NOMAD_ALLOC_DIR}, at its start; write the rest of the path as it is`,
    ],
    [
      'a dir as destination',
      { data: 'x', destination: 'local' },
      `${TASK}: template.destination "local" names a dir; name the file to write, like "local/app.conf"`,
    ],
    [
      'a destination an isolated task does not see',
      { data: 'x', destination: 'conf/app.conf' },
      `${TASK}: template.destination "conf/app.conf" is outside what an isolated (exec) task sees of its dirs: write it under local/, secrets/ or alloc/`,
    ],
    [
      'bad perms',
      { data: 'x', destination: 'local/x', perms: '0999' },
      `${TASK}: template.perms "0999" is not an octal file mode like "0644" or "0600"`,
    ],
    ['a negative uid', { data: 'x', destination: 'local/x', uid: -1 }, `${TASK}: template.uid must be between 0 and 4294967294 (got -1)`],
    [
      'signal without change_signal',
      { data: 'x', destination: 'local/x', change_mode: 'signal' },
      `${TASK}: template.change_signal is required with change_mode = "signal": name the signal to send, like SIGHUP`,
    ],
    [
      'a signal that is not one',
      { data: 'x', destination: 'local/x', change_mode: 'signal', change_signal: 'SIGNOPE' },
      `${TASK}: template.change_signal "SIGNOPE" is not a signal; name one like SIGHUP or SIGUSR1`,
    ],
    [
      'change_mode script',
      { data: 'x', destination: 'local/x', change_mode: 'script' },
      `${TASK}: template.change_mode "script" is not supported: csiplug runs no change scripts; use "signal" (the task reloads itself), "restart" or "noop"`,
    ],
    [
      'change_script',
      { data: 'x', destination: 'local/x', change_script: { command: '/bin/reload' } },
      `${TASK}: template.change_script is not supported: csiplug runs no scripts on a change: use change_mode = "signal" (the task reloads itself) or "restart"; remove it`,
    ],
    [
      'wait',
      { data: 'x', destination: 'local/x', wait: { min: '5s' } },
      `${TASK}: template.wait is not supported: csiplug renders when the task starts and on a SIGHUP of the agent, never on a Consul or Vault change, so there is nothing to wait for; remove it`,
    ],
    [
      'vault_grace',
      { data: 'x', destination: 'local/x', vault_grace: '5s' },
      `${TASK}: template.vault_grace is not supported: csiplug does not use Vault; remove it`,
    ],
    [
      'an empty delimiter',
      { data: 'x', destination: 'local/x', left_delimiter: '' },
      `${TASK}: template.left_delimiter "" is not a delimiter: give one without white space, like "[["`,
    ],
    [
      'a Consul function',
      { data: 'a\n{{ key "app/x" }}', destination: 'local/x' },
      `${TASK}: template.data is not a template csiplug renders: template "local/x" line 2, column 4: function "key" reads Consul, which csiplug does not use; put the value in the task's env and read it with {{ env "NAME" }}`,
    ],
    [
      'a field access',
      { data: '{{ .Values.port }}', destination: 'local/x' },
      `${TASK}: template.data is not a template csiplug renders: template "local/x" line 1, column 4: field access .Values is not supported: a csiplug template has no data to read fields of (no Consul, Vault or Nomad objects); use {{ env "NAME" }} and the task's variables`,
    ],
    [
      'a source with ${…}',
      { source: '${NOMAD_TASK_DIR}/x.tpl', destination: 'local/x' },
      `${TASK}: template.source "\${NOMAD_TASK_DIR}/x.tpl" may not use \${…}: give the path as it is (absolute, or relative to the task dir)`,
    ],
    [
      'an unknown field',
      { data: 'x', destination: 'local/x', colour: 'red' },
      `${TASK}: template.colour is not a known field (known: data, source, destination, perms, uid, gid, env, change_mode, change_signal, left_delimiter, right_delimiter, splay, error_on_missing_key)`,
    ],
  ])('refuses %s', (_what, template, message) => {
    expect(problems(job(template))).toEqual([message]);
  });

  it('parses the template with its own delimiters', () => {
    expect(
      taskOf(job({ data: '[[ env "A" ]] {{ .Anything }}', destination: 'local/x', left_delimiter: '[[', right_delimiter: ']]' })).templates,
    ).toHaveLength(1);
    expect(problems(job({ data: '[[ key "x" ]]', destination: 'local/x', left_delimiter: '[[', right_delimiter: ']]' }))[0]).toMatch(
      /template\.data is not a template csiplug renders: template "local\/x" line 1, column 4: function "key"/,
    );
  });

  it('refuses two templates to one destination, naming the second', () => {
    expect(
      problems(
        job([
          { data: 'a', destination: 'local/x' },
          { data: 'b', destination: 'local/./x' },
        ]),
      ),
    ).toEqual([
      `${TASK}: template[1].destination "local/x" is already the destination of another template of this task; give each its own file`,
    ]);
  });

  it('reports every problem of every template in one pass', () => {
    expect(
      problems(
        job([
          { destination: '/abs', data: '{{ key "x" }}' },
          { data: 'b', destination: 'local/y', perms: 'rw' },
        ]),
      ),
    ).toEqual([
      `${TASK}: template[0].destination "/abs" must be relative to the task dir, like "local/app.conf" or "secrets/token"`,
      `${TASK}: template[0].data is not a template csiplug renders: template "/abs" line 1, column 4: function "key" reads Consul, which csiplug does not use; put the value in the task's env and read it with {{ env "NAME" }}`,
      `${TASK}: template[1].perms "rw" is not an octal file mode like "0644" or "0600"`,
    ]);
  });

  it("a changed template is a change of its task that needs a new alloc (as Nomad's tasksUpdated)", () => {
    const before = validateJob(job({ data: 'v1', destination: 'local/x' }));
    const after = validateJob(job({ data: 'v2', destination: 'local/x' }));
    const changes = diffGroup(after, before.groups[0]!, after.groups[0]!);
    expect(changes.map((c) => c.field)).toEqual(['task "server" template']);
    expect(isDestructive(changes)).toBe(true);
  });
});
