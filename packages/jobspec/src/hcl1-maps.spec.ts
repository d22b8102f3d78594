// Blocks of quoted keys (HCL 1's map form, as Nomad's agent config docs
// write them) read as maps in an agent config, and nowhere else.
import type { ValidationError } from '@csiplug/core';
import { parseAgentConfig } from './agent-config';
import { loadDocument } from './document';
import { quotedNameBlockAsMap } from './hcl1-maps';

async function errorOf(p: Promise<unknown>): Promise<ValidationError> {
  try {
    await p;
  } catch (err) {
    return err as ValidationError;
  }
  throw new Error('expected a refusal');
}

describe('HCL 1 maps in an agent config', () => {
  it('reads every block of quoted keys as a map, nested in client {}, next to plain blocks', async () => {
    const config = await parseAgentConfig(
      `data_dir = "/d"
client {
  enabled = true
  meta {
    "rack"      = "r1"
    "disk.type" = "nvme" # a dotted key: only quoted in HCL
  }
  chroot_env {
    "/bin" = "/bin"
    // a comment with a { brace
    "/srv/tools" = "/opt/tools"
  }
}
`,
      'nomad.hcl',
    );
    expect(config.exec.chrootEnv).toEqual({ '/bin': '/bin', '/srv/tools': '/opt/tools' });
  });

  it('keeps the line numbers of a later error after rewriting, and refuses what HCL 1 does not read as a map either', async () => {
    const later = await errorOf(
      parseAgentConfig('data_dir = "/d"\nclient {\n  chroot_env {\n    "/bin" = "/bin"\n  }\n}\nbroken = \n', 'nomad.hcl'),
    );
    expect(later.message).toMatch(/^nomad\.hcl: invalid HCL: nomad\.hcl:7,10/);
    // A labelled block is a block in HCL 1 too: its quoted names stay an error, with the hint.
    const labelled = await errorOf(parseAgentConfig('data_dir = "/d"\nplugin "exec" {\n  "x" = 1\n}\n', 'nomad.hcl'));
    expect(labelled.message).toMatch(/nomad\.hcl:3,3.*Argument names must not be quoted.*write it as name = \{ "key" = "value" \}/);
  });

  it('says what the user wrote when a block read as a map is no map either (a block inside it, two of them)', async () => {
    const nested = await errorOf(
      parseAgentConfig(
        'data_dir = "/d"\nclient {\n  chroot_env {\n    "/bin" = "/bin"\n    inner {\n      x = 1\n    }\n  }\n}\n',
        'nomad.hcl',
      ),
    );
    expect(nested.message).toMatch(
      /^nomad\.hcl: invalid HCL: nomad\.hcl:4,5-\d+: Invalid argument name; Argument names must not be quoted\. \(read as an HCL 1 map of quoted keys, the block is not one either: nomad\.hcl:5,/,
    );
    expect(nested.message).not.toContain('chroot_env =');
  });

  it('is only for agent configs: a jobspec block of quoted keys is refused, as Nomad refuses it', async () => {
    const job = await errorOf(loadDocument('job "j" {\n  meta {\n    "a" = "b"\n  }\n}\n', 'j.nomad'));
    expect(job.message).toMatch(/^j\.nomad: invalid HCL: j\.nomad:3,5.*Argument names must not be quoted/);
  });

  it('rewrites only the header line of the block the complaint is in', () => {
    const text = 'a {\n  b {\n    "k" = "v"\n  }\n}\n';
    expect(quotedNameBlockAsMap(text, 'x.hcl:3,5-8: Invalid argument name; Argument names must not be quoted.')).toEqual({
      text: 'a {\n  b = {\n    "k" = "v"\n  }\n}\n',
      firstLine: 2,
      lastLine: 4,
    });
    expect(quotedNameBlockAsMap(text, 'x.hcl:3,5-8: Unsupported argument; nothing of the kind.')).toBeUndefined();
    expect(quotedNameBlockAsMap('"k" = 1\n', 'x.hcl:1,1-4: Invalid argument name; Argument names must not be quoted.')).toBeUndefined();
  });
});

describe("a Nomad agent config's blocks csiplug has no use for", () => {
  it.each<[string, string]>([
    ['server {\n  enabled = true\n  bootstrap_expect = 1\n}', 'server is not supported: csiplug is the client side only, with no servers'],
    ['telemetry {\n  prometheus_metrics = true\n}', 'telemetry is not supported: csiplug serves its metrics at /v1/metrics'],
    ['ports {\n  http = 4646\n}', 'ports is not supported: csiplug serves its API on one port, port'],
    [
      'client {\n  host_volume "nfs" {\n    path = "/srv/nfs"\n  }\n}',
      'client.host_volume is not supported: csiplug has no host volumes yet',
    ],
    ['client {\n  servers = ["10.0.0.1"]\n}', 'client.servers is not supported: a csiplug agent joins no servers'],
  ])('%s: refused with what to do instead', async (block, said) => {
    const err = await errorOf(parseAgentConfig(`data_dir = "/d"\n${block}\n`, 'nomad.hcl'));
    expect(err.message).toContain(`nomad.hcl: ${said}`);
    expect(err.message).toMatch(/remove it$/m);
  });
});
