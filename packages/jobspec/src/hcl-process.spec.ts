// HCL parsing in a child process: answers, syntax errors with their place,
// the process gone once idle, and a parser that dies mid-parse.
import { execFileSync } from 'child_process';
import { HCL_PARSER_IDLE_MS, HclSyntaxError, parseHclText } from './hcl-process';
import { loadDocument } from './document';

/** The pids of this process's children running the parser. */
function parserPids(): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(process.pid), '-f', 'CSIPLUG_HCL2JSON'])
      .toString()
      .trim()
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('parseHclText', () => {
  it('parses in a child process: this process never loads the converter', async () => {
    const doc = await parseHclText('a.hcl', 'job "web" {\n  group "g" {\n    count = 2\n  }\n}\n');
    expect(doc).toEqual({ job: { web: [{ group: { g: [{ count: 2 }] } }] } });
    expect(Object.keys(require.cache).some((k) => k.includes('hcl2json'))).toBe(false);
  });

  it('reports a syntax error with its file and line, as a ValidationError from loadDocument', async () => {
    await expect(parseHclText('bad.hcl', 'job "x" {\n  count = \n}\n')).rejects.toBeInstanceOf(HclSyntaxError);
    await expect(loadDocument('job "x" {\n  count = \n}\n', 'bad.hcl')).rejects.toThrow(/^bad\.hcl: invalid HCL: bad\.hcl:\d+,\d+/);
  });

  it('serves many parses with one process, which ends once idle', async () => {
    // The parser of an earlier test ends first (it is idle): then one process serves the whole batch.
    for (let i = 0; i < 50 && parserPids().length > 0; i++) await sleep(HCL_PARSER_IDLE_MS);
    const docs = await Promise.all(Array.from({ length: 20 }, (_, i) => parseHclText(`f${i}.hcl`, `n = ${i}\n`)));
    expect(docs.map((d) => (d as { n: number }).n)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(parserPids().length).toBeLessThanOrEqual(1);
    for (let i = 0; i < 50 && parserPids().length > 0; i++) await sleep(HCL_PARSER_IDLE_MS);
    expect(parserPids()).toEqual([]);
  });

  it('a parser that dies fails the parse it had with a clear error, and the next parse starts another', async () => {
    const big = `x = "${'a'.repeat(2_000_000)}"\n`;
    const parsing = parseHclText('big.hcl', big);
    let pids: number[] = [];
    // Bounded by real time, not a count of tries: a loaded machine may take seconds to start the parser.
    for (const deadline = Date.now() + 30_000; pids.length === 0 && Date.now() < deadline;) {
      pids = parserPids();
      if (pids.length === 0) await sleep(10);
    }
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    await expect(parsing).rejects.toThrow(/the HCL parser process (ended unexpectedly \(killed, or out of memory\)|exited \(SIGKILL\))/);
    expect(await parseHclText('again.hcl', 'y = 1\n')).toEqual({ y: 1 });
  });
});

describe('parseHclText with input that breaks the converter', () => {
  it('absurd nesting is an error of the parser, not of the text; the next parse gets a fresh parser and answers', async () => {
    const deep = `x = ${'['.repeat(3000)}${']'.repeat(3000)}\n`;
    const failed = await parseHclText('deep.hcl', deep).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failed).toBeInstanceOf(Error);
    expect(failed).not.toBeInstanceOf(HclSyntaxError);
    expect((failed as Error).message).toMatch(/^the HCL parser failed: /);
    expect(await parseHclText('after.hcl', 'ok = true\n')).toEqual({ ok: true });
  });
});
