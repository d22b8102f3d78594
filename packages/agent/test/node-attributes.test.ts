// Node attributes in interpolation through a real agent: the agent config's
// name, datacenter and client { meta } and the machine's fingerprint reach a
// task's env as Nomad's `${attr.…}`, `${node.…}`, `${meta.…}` and NOMAD_DC;
// an unknown name is refused when the job is run (400, naming it), and a
// meta key this agent lacks fails the task's start naming the key.
import { ApiError } from '@csiplug/api';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { goArch } from '@csiplug/runner';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { AgentHarness, pollUntil } from './support/agent-process';

jest.setTimeout(120_000);

const job = (id: string, env: string) => `
job "${id}" {
  group "app" {
    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "printf '%s|%s|%s|%s|%s' \\"$HOST\\" \\"$ARCH\\" \\"$RACK\\" \\"$NAME\\" \\"$DC\\" > \\"$NOMAD_ALLOC_DIR/out\\"; exec sleep 3600"]
      }
      env {
${env}
      }
      kill_timeout = "1s"
    }
  }
}`;

describe("the node's attributes in a task's interpolation", () => {
  let h: AgentHarness;
  beforeAll(async () => {
    h = new AgentHarness('name = "storage-x"\ndatacenter = "dc9"\nclient {\n  meta {\n    rack = "r9"\n  }\n}\n');
    await h.start();
  });
  afterAll(async () => {
    await h.cleanup();
  });

  it('resolves attr, node, meta and NOMAD_DC from the agent config and the machine', async () => {
    const env =
      '        HOST = "${attr.unique.hostname}"\n        ARCH = "${attr.cpu.arch}"\n        RACK = "${meta.rack}"\n' +
      '        NAME = "${node.unique.name}"\n        DC = "${NOMAD_DC}"';
    const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(job('attrs', env), 'attrs.hcl')));
    const out = path.join(h.dataDir, 'allocs', allocIds[0]!, 'alloc', 'out');
    const text = await pollUntil(
      'the task wrote its env',
      async () => (fs.existsSync(out) ? fs.readFileSync(out, 'utf8') || undefined : undefined),
      30_000,
    );
    expect(text).toBe(`${os.hostname()}|${goArch(process.arch, os.endianness())}|r9|storage-x|dc9`);
  });

  it('refuses an unknown name when the job is run, naming the field and the name', async () => {
    const doc = jobToNomadJson(await parseJobspec(job('bogus', '        HOST = "x"'), 'bogus.hcl'));
    doc.TaskGroups[0]!.Tasks[0]!.Env.HOST = '${attr.unique.hostnam}';
    const err = await h.api.runJob(doc).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(400);
    expect((err as ApiError).message).toContain(
      'env.HOST uses ${attr.unique.hostnam}: attr.unique.hostnam is not a node attribute csiplug has',
    );
  });

  it("a meta key this agent lacks fails the task's start, naming the key", async () => {
    const { allocIds } = await h.api.runJob(
      jobToNomadJson(await parseJobspec(job('nometa', '        RACK = "${meta.zone}"'), 'nometa.hcl')),
    );
    const failure = await pollUntil(
      'the Setup Failure event',
      async () => (await h.api.getAlloc(allocIds[0]!)).tasks.main?.events.find((e) => e.type === 'Setup Failure'),
      30_000,
    );
    expect(failure.message).toBe(
      "env.RACK: ${meta.zone} has no value on this node: add zone to the agent's client { meta }, or change the job",
    );
  });
});
