import { type FlagSpec, UsageError, formatFlags, parseArgs } from './args';

const specs: FlagSpec[] = [
  { name: 'json', kind: 'bool', help: 'json' },
  { name: 'force', kind: 'bool', help: 'force' },
  { name: 'address', kind: 'string', help: 'The address.', valueName: 'addr', env: 'CSIPLUG_ADDR', dflt: 'http://x' },
];

describe('parseArgs', () => {
  it('reads -flag and --flag alike', () => {
    for (const argv of [
      ['-json', '-address', 'http://x:1', 'ID'],
      ['--json', '--address', 'http://x:1', 'ID'],
      ['-json', '-address=http://x:1', 'ID'],
      ['--json=true', '--address=http://x:1', 'ID'],
    ]) {
      const p = parseArgs(argv, specs);
      expect(p.flags.get('json')).toBe(true);
      expect(p.flags.get('address')).toBe('http://x:1');
      expect(p.positionals).toEqual(['ID']);
      expect(p.help).toBe(false);
    }
  });

  it('allows flags after positionals and stops at --', () => {
    const p = parseArgs(['ID', '-force', 'TASK', '--', '-json'], specs);
    expect(p.positionals).toEqual(['ID', 'TASK', '-json']);
    expect(p.flags.get('force')).toBe(true);
    expect(p.flags.has('json')).toBe(false);
  });

  it('reads Go-style boolean values', () => {
    expect(parseArgs(['-json=false'], specs).flags.get('json')).toBe(false);
    expect(parseArgs(['-json=0'], specs).flags.get('json')).toBe(false);
    expect(parseArgs(['-json=T'], specs).flags.get('json')).toBe(true);
    expect(() => parseArgs(['-json=yes'], specs)).toThrow(/invalid boolean value "yes" for -json/);
  });

  it('takes the next word as a string value, whatever it looks like, and = keeps the rest', () => {
    expect(parseArgs(['-address', '-json'], specs).flags.get('address')).toBe('-json');
    expect(parseArgs(['-address=a=b'], specs).flags.get('address')).toBe('a=b');
    expect(parseArgs(['-address='], specs).flags.get('address')).toBe('');
  });

  it("keeps every value of a repeatable (list) flag in order, as Nomad's -secret; a string flag keeps the last", () => {
    const withList: FlagSpec[] = [...specs, { name: 'secret', kind: 'list', help: 'A secret.', valueName: 'key=value' }];
    const p = parseArgs(['-secret', 'a=1', 'ID', '-secret=b=2', '-address', 'x', '-address', 'y'], withList);
    expect(p.flags.get('secret')).toEqual(['a=1', 'b=2']);
    expect(p.flags.get('address')).toBe('y');
    expect(p.positionals).toEqual(['ID']);
    expect(() => parseArgs(['-secret'], withList)).toThrow('flag needs an argument: -secret');
    expect(formatFlags(withList.slice(-1))).toBe('  -secret=<key=value>\n    A secret.');
  });

  it('treats a lone - as a positional (stdin)', () => {
    expect(parseArgs(['-'], specs).positionals).toEqual(['-']);
  });

  it('recognises -h, -help and --help', () => {
    for (const h of ['-h', '-help', '--help', '--h']) expect(parseArgs(['ID', h], specs).help).toBe(true);
  });

  it('refuses unknown flags, missing values and bad syntax', () => {
    expect(() => parseArgs(['-nope'], specs)).toThrow(new UsageError('flag provided but not defined: -nope'));
    expect(() => parseArgs(['--nope=1'], specs)).toThrow(/not defined: -nope/);
    expect(() => parseArgs(['-address'], specs)).toThrow(/flag needs an argument: -address/);
    expect(() => parseArgs(['---json'], specs)).toThrow(/bad flag syntax/);
    expect(() => parseArgs(['-=x'], specs)).toThrow(/bad flag syntax/);
  });

  it('describes flags for help', () => {
    expect(formatFlags(specs.slice(2))).toBe(
      '  -address=<addr>\n    The address. Overrides the CSIPLUG_ADDR environment variable if set.\n    Default = http://x',
    );
  });
});
