// A job's datacenters, read as Nomad reads them and matched as its glob does.
import { datacenterMatches } from './datacenters';
import { parseJobspec } from './jobspec';
import { jobFromNomadJson, jobToNomadJson } from './nomad-json';

const jobWith = (line: string): string =>
  `job "web" {\n  ${line}\n  group "g" {\n    task "t" {\n      driver = "raw_exec"\n      config {\n        command = "/bin/true"\n      }\n    }\n  }\n}\n`;

describe('datacenters', () => {
  it('reads a Nomad job\'s datacenters; ["*"], [] and none are every datacenter, as Nomad fills them in', async () => {
    expect((await parseJobspec(jobWith('datacenters = ["dc1"]'), 'j.nomad')).datacenters).toEqual(['dc1']);
    expect((await parseJobspec(jobWith('datacenters = ["eu-*", "dc1", "dc1"]'), 'j.nomad')).datacenters).toEqual(['dc1', 'eu-*']);
    for (const line of ['datacenters = ["*"]', 'datacenters = ["dc1", "*"]', 'datacenters = []', '# none'])
      expect((await parseJobspec(jobWith(line), 'j.nomad')).datacenters).toBeUndefined();
  });

  it('refuses an entry that names no datacenter, saying which', async () => {
    await expect(parseJobspec(jobWith('datacenters = ["dc1", ""]'), 'j.nomad')).rejects.toThrow(
      'j.nomad: job "web": datacenters[1] is empty: name a datacenter, or "*" for every one',
    );
    await expect(parseJobspec(jobWith('datacenters = "dc1"'), 'j.nomad')).rejects.toThrow(/datacenters must be a list of strings/);
  });

  it('goes both ways through Nomad\'s JSON job: Datacenters as given, ["*"] for every one', async () => {
    const job = await parseJobspec(jobWith('datacenters = ["dc1"]'), 'j.nomad');
    expect(jobToNomadJson(job).Datacenters).toEqual(['dc1']);
    expect(jobFromNomadJson(jobToNomadJson(job)).datacenters).toEqual(['dc1']);
    const anywhere = await parseJobspec(jobWith(''), 'j.nomad');
    expect(jobToNomadJson(anywhere).Datacenters).toEqual(['*']);
    expect(jobFromNomadJson({ ...jobToNomadJson(anywhere), Datacenters: [] }).datacenters).toBeUndefined();
  });

  it.each<[string[], string, boolean]>([
    [['dc1'], 'dc1', true],
    [['dc1'], 'dc12', false],
    [['dc*'], 'dc12', true],
    [['*-1'], 'eu-1', true],
    [['eu-*-b'], 'eu-west-b', true],
    [['eu-*-b'], 'eu-b', false],
    [['a*b*c'], 'abc', true],
    [['a*b*c'], 'acb', false],
    [['a*a'], 'a', false],
    [['x', '*'], 'anything', true],
  ])('%j matches "%s": %s', (patterns, dc, matches) => {
    expect(datacenterMatches(patterns, dc)).toBe(matches);
  });
});
