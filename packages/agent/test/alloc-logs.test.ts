// A task log far larger than the agent's heap: a real agent process with a
// 64 MB heap serves the last bytes, a range in the middle, and the whole
// 200 MB file as a stream, and comes out healthy, its peak memory grown by
// a small fraction of the file's size.
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { promisify } from 'util';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { AgentHarness, BIN, pollUntil } from './support/agent-process';

jest.setTimeout(180_000);
const run = promisify(execFile);

const MiB = 1024 * 1024;
const BIG = 200 * MiB;

const CHATTY_JOB = `
job "chatty" {
  group "app" {
    task "main" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo hello from the task; exec sleep 3600"]
      }
    }
  }
}`;

/** A process's resident memory now (VmRSS) and at its peak (VmHWM), in bytes. */
function memory(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status);
    if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
    return Number(m[1]) * 1024;
  };
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

/** `length` bytes of `file` at `position`, read here to compare with what the agent serves. */
function bytesAt(file: string, position: number, length: number): Buffer {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(length);
    fs.readSync(fd, buf, 0, length, position);
    return buf;
  } finally {
    fs.closeSync(fd);
  }
}

describe('task logs larger than the agent’s heap', () => {
  let h: AgentHarness;
  let logFile: string | undefined;

  beforeAll(async () => {
    h = new AgentHarness('', { nodeArgs: ['--max-old-space-size=64'] });
    await h.start();
  });

  afterAll(async () => {
    if (logFile) fs.rmSync(logFile, { force: true });
    await h.cleanup();
  });

  it('serves ranges and a full stream of a 200 MB log in constant memory', async () => {
    const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(CHATTY_JOB, 'chatty.hcl')));
    const allocId = allocIds[0]!;
    await pollUntil(
      'the task’s first line',
      async () => ((await h.api.allocLogs(allocId, 'main')).data.includes('hello from the task') ? true : undefined),
      30_000,
    );
    logFile = path.join(h.dataDir, 'allocs', allocId, 'main', 'stdout.log');

    // Grow it past the heap limit in 1 MiB writes, numbering the lines so every range is distinct.
    const fd = fs.openSync(logFile, 'a');
    try {
      let line = 0;
      while (fs.fstatSync(fd).size < BIG) {
        const parts: string[] = [];
        let bytes = 0;
        while (bytes < MiB) {
          const text = `line ${line++} of a log bigger than the agent's heap ✓\n`;
          parts.push(text);
          bytes += Buffer.byteLength(text);
        }
        fs.writeSync(fd, parts.join(''));
      }
    } finally {
      fs.closeSync(fd);
    }
    const size = fs.statSync(logFile).size;
    expect(size).toBeGreaterThan(BIG);

    // The agent's own baseline (node, gRPC, SQLite) is over 100 MB: measure what the reads add to it.
    // Writing 5 to clear_refs restarts the high-water mark from the current RSS.
    fs.writeFileSync(`/proc/${h.proc!.pid}/clear_refs`, '5');
    const baseline = memory(h.proc!.pid!).rss;
    const tail = await h.api.allocLogs(allocId, 'main', { origin: 'end', offset: 10 });
    expect(tail).toMatchObject({ size, offset: size - 10, nextOffset: size });
    expect(Buffer.from(tail.data)).toEqual(bytesAt(logFile, size - 10, 10));

    const middle = Math.floor(size / 2);
    const mid = await h.api.allocLogStream(allocId, 'main', { offset: middle, limit: 10 });
    const midBytes: Buffer[] = [];
    for await (const c of mid.stream) midBytes.push(c as Buffer);
    expect(mid).toMatchObject({ offset: middle, size });
    expect(Buffer.concat(midBytes)).toEqual(bytesAt(logFile, middle, 10));
    const midJson = await h.api.allocLogs(allocId, 'main', { offset: middle, limit: 10 });
    expect(midJson.size).toBe(size);
    expect(Buffer.byteLength(midJson.data)).toBe(midJson.nextOffset - midJson.offset);

    // The whole file, counted and dropped as it arrives.
    const all = await h.api.allocLogStream(allocId, 'main');
    let streamed = 0;
    for await (const c of all.stream) streamed += (c as Buffer).length;
    expect(streamed).toBe(size);

    // The CLI prints exactly the bytes, and refuses more than the JSON limit with -json.
    const cli = (args: string[]) =>
      run(process.execPath, [BIN, 'alloc', 'logs', '-address', `http://127.0.0.1:${h.port}`, ...args, allocId, 'main'], {
        encoding: 'buffer',
        maxBuffer: 4 * MiB,
      });
    expect((await cli(['-tail', '-offset', '10'])).stdout).toEqual(bytesAt(logFile, size - 10, 10));
    expect((await cli(['-offset', String(middle), '-limit', '1000'])).stdout).toEqual(bytesAt(logFile, middle, 1000));
    const refused = await cli(['-json', '-limit', String(8 * MiB)]).catch((err: { code?: number; stderr?: Buffer }) => err);
    expect(refused).toMatchObject({ code: 1 });
    expect(String((refused as { stderr: Buffer }).stderr)).toMatch(/-limit over 4194304 bytes \(4 MiB\) cannot be used with -json/);

    expect((await h.api.health()).ok).toBe(true);
    expect(h.proc!.exitCode).toBeNull();
    // Reading the file into memory adds at least its size (the old readFile + toString added 600 MB here); streaming adds chunks and socket buffers.
    const { peak } = memory(h.proc!.pid!);
    expect(peak - baseline).toBeLessThan(size / 4);
    expect(peak).toBeLessThan(size);

    fs.rmSync(logFile);
    logFile = undefined;
  });
});
