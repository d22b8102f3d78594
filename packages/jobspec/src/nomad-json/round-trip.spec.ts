// Every example and fixture jobspec survives HCL → JobSpec → Nomad JSON → JobSpec unchanged.
import * as fs from 'fs';
import * as path from 'path';
import { parseJobspec } from '../jobspec';
import { jobFromNomadJson } from './from-nomad-json';
import { jobToNomadJson } from './to-nomad-json';

const EXAMPLES = path.resolve(__dirname, '../../../../examples');
const FIXTURES = path.resolve(__dirname, '../../test/fixtures/nomad-json');

const jobFiles = (dir: string): string[] =>
  fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.nomad.hcl') || f.endsWith('.nomad'))
    .map((f) => path.join(dir, f));

describe('the Nomad JSON round trip', () => {
  const files = [...jobFiles(EXAMPLES), ...jobFiles(FIXTURES)];

  it('has the example and fixture jobspecs to go through', () => {
    expect(files.length).toBeGreaterThanOrEqual(6);
  });

  it.each(files.map((f) => [path.relative(path.resolve(__dirname, '../../../..'), f), f]))('%s', async (_name, file) => {
    const parsed = await parseJobspec(fs.readFileSync(file, 'utf8'), path.basename(file));
    const json = jobToNomadJson(parsed);
    // Through the wire as JSON text, as the API and the CLI carry it.
    const back = jobFromNomadJson(JSON.parse(JSON.stringify(json)));
    expect(back).toEqual(parsed);
  });
});
