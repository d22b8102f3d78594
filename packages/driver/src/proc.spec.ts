import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { TRANSIENT_FS_ERROR_CODES } from '@csiplug/core';
import { TRANSIENT_ERRNO_CODES, decodeWaitStatus, isSameProcess, parseProcStat, processStartTime, readProcStat, signalName } from './proc';

// A real line (cat), with 52 fields.
const CAT =
  '14524 (cat) R 14522 14522 11651 0 -1 4194304 98 0 0 0 0 0 0 0 20 0 1 0 160373 3133440 389 18446744073709551615 94513013424128 94513013444009 140725340368976 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94513013460016 94513013461632 94513407209472 140725340371682 140725340371702 140725340371702 140725340372971 0';

function withComm(comm: string, state = 'S', startTime = '4242', exitStatus = '0'): string {
  const fields = CAT.slice(CAT.lastIndexOf(')') + 2).split(' ');
  fields[0] = state;
  fields[22 - 3] = startTime;
  fields[52 - 3] = exitStatus;
  return `77 (${comm}) ${fields.join(' ')}\n`;
}

describe('parseProcStat', () => {
  it('reads the fields the driver needs from a real line', () => {
    expect(parseProcStat(CAT)).toEqual({
      pid: 14524,
      comm: 'cat',
      state: 'R',
      ppid: 14522,
      pgrp: 14522,
      session: 11651,
      startTime: '160373',
      exitStatus: 0,
    });
  });

  it.each([['a b'], ['x) S 1 2 3 (y'], ['))'], [') ('], ['(']])('is not fooled by the command name %j', (comm) => {
    const stat = parseProcStat(withComm(comm, 'Z', '987654', '768'));
    expect(stat).toMatchObject({ pid: 77, comm, state: 'Z', startTime: '987654', exitStatus: 768 });
  });

  it('leaves exitStatus out on kernels that do not print field 52', () => {
    const short = CAT.split(' ').slice(0, 44).join(' ');
    expect(parseProcStat(short).exitStatus).toBeUndefined();
    expect(parseProcStat(short).startTime).toBe('160373');
  });

  it('rejects malformed lines', () => {
    expect(() => parseProcStat('12 cat R 1')).toThrow(/malformed/);
    expect(() => parseProcStat('12 (cat) R 1 2')).toThrow(/too few fields/);
  });
});

describe('process identity', () => {
  it('knows this very process by pid and start time', () => {
    const startTime = processStartTime(process.pid);
    expect(startTime).toMatch(/^\d+$/);
    expect(isSameProcess(process.pid, startTime!)).toBe(true);
    expect(readProcStat(process.pid)?.pid).toBe(process.pid);
  });

  it('does not take another start time for the same process', () => {
    const startTime = processStartTime(process.pid)!;
    expect(isSameProcess(process.pid, String(Number(startTime) + 1))).toBe(false);
    expect(isSameProcess(process.pid, '')).toBe(false);
  });

  it('never names pid 0, 1, negative or absent processes', () => {
    for (const pid of [0, 1, -1, -process.pid, 1.5, 2 ** 31]) expect(readProcStat(pid)).toBeUndefined();
    expect(isSameProcess(1, processStartTime(process.pid)!)).toBe(false);
  });
});

describe('decodeWaitStatus', () => {
  it('decodes exit codes and signals', () => {
    expect(decodeWaitStatus(0)).toEqual({ exitCode: 0, signal: null });
    expect(decodeWaitStatus(3 << 8)).toEqual({ exitCode: 3, signal: null });
    expect(decodeWaitStatus(9)).toEqual({ exitCode: null, signal: 'SIGKILL' });
    expect(decodeWaitStatus(15 | 0x80)).toEqual({ exitCode: null, signal: 'SIGTERM' });
  });

  it('names signals', () => {
    expect(signalName(15)).toBe('SIGTERM');
    expect(signalName(99)).toBe('SIG99');
  });
});

describe('transient errno codes', () => {
  it('are the ones @csiplug/core classifies as transient (the executor cannot import core, so the list is kept twice)', () => {
    expect([...TRANSIENT_ERRNO_CODES].sort()).toEqual([...TRANSIENT_FS_ERROR_CODES].sort());
  });
});

describe('readers in a process out of file descriptors', () => {
  // A real EMFILE: a node process under `ulimit -n` opens files until the
  // kernel refuses, then reads /proc and a record through the built readers.
  const DIST = join(__dirname, '../dist');

  it('throw TransientReadError for EMFILE, never "no such process" or "no record"', () => {
    for (const file of ['proc', 'executor-protocol']) {
      const built = join(DIST, `${file}.js`);
      if (!existsSync(built) || statSync(join(__dirname, `${file}.ts`)).mtimeMs > statSync(built).mtimeMs + 1000) {
        throw new Error(
          `${built} is missing or older than src/${file}.ts: build @csiplug/driver first (tsc -p tsconfig.lib.json; the test target does)`,
        );
      }
    }
    const script = `
      const { readProcStat, TransientReadError } = require(${JSON.stringify(join(DIST, 'proc.js'))});
      const { readJsonFile } = require(${JSON.stringify(join(DIST, 'executor-protocol.js'))});
      const fs = require('node:fs');
      const held = [];
      try { for (;;) held.push(fs.openSync('/dev/null', 'r')); } catch (e) { if (e.code !== 'EMFILE') throw e; }
      const outcome = (read) => { try { return { value: read() === undefined ? 'undefined' : 'value' }; } catch (e) { return { error: e.name, transient: e instanceof TransientReadError, errno: e.errno }; } };
      const result = { stat: outcome(() => readProcStat(process.pid)), record: outcome(() => readJsonFile(${JSON.stringify(join(__dirname, '../package.json'))})) };
      for (const fd of held) fs.closeSync(fd);
      result.after = outcome(() => readProcStat(process.pid));
      process.stdout.write(JSON.stringify(result));
    `;
    const out = execFileSync('/bin/sh', ['-c', 'ulimit -n 32 && exec "$0" -e "$1"', process.execPath, script], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual({
      stat: { error: 'TransientReadError', transient: true, errno: 'EMFILE' },
      record: { error: 'TransientReadError', transient: true, errno: 'EMFILE' },
      after: { value: 'value' },
    });
  });
});
