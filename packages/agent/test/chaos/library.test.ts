// The fault suite's own parts, so that its figures can be trusted: the full
// run covers every crash point in every variant (the catalog's with a
// controller that publishes), every fault kind in every phase, the leak
// counters see what they are meant to see (a process under the round's dir
// by its cwd, command line or environment; a record left in a state file),
// and the table prints as the issue quotes it.
import { CRASH_POINTS, type CrashPointName } from '@csiplug/core';
import { openClientState } from '@csiplug/state';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { isAlive, pollUntil } from '../support/agent-process';
import { formatLeaks, noLeaks, processesUnder, readStateLeftovers } from './leaks';
import {
  CI_FAULT_CASES,
  CRASH_POINT_ACTIONS,
  crashCase,
  crashPointScenario,
  faultCases,
  formatTable,
  pluginFaultScenarioCi,
} from './scenarios';

describe('the fault suite library', () => {
  it('the full crash-point run covers every point in four variants, ≥ 100 rounds', () => {
    const points = Object.keys(CRASH_POINTS) as CrashPointName[];
    expect(crashPointScenario.rounds.full).toBeGreaterThanOrEqual(100);
    const seen = new Map<string, Set<string>>();
    for (let i = 0; i < crashPointScenario.rounds.full; i++) {
      const c = crashCase(i);
      const variant = `${c.workloads}:${c.controllerPublish}`;
      seen.set(c.point, (seen.get(c.point) ?? new Set()).add(variant));
      if (c.point.startsWith('catalog.')) expect(c.controllerPublish).toBe(true);
      expect(c.count).toBeGreaterThanOrEqual(1);
    }
    for (const p of points) expect([p, seen.get(p)?.size]).toEqual([p, p.startsWith('catalog.') ? 2 : 4]);
    // The CI run takes each point once.
    expect(new Set(Array.from({ length: crashPointScenario.rounds.ci }, (_, i) => crashCase(i).point)).size).toBe(points.length);
    expect(Object.keys(CRASH_POINT_ACTIONS).sort()).toEqual([...points].sort());
  });

  it('the fault cases take every fault in every phase; the CI ones exist', () => {
    const cases = faultCases();
    for (const phase of ['prerun', 'restore', 'postrun']) {
      const mine = cases.filter((c) => c.phase === phase);
      for (const kind of [
        'no-socket',
        'not-grpc',
        'crash at start',
        'hang ',
        'garbage from ',
        'slower than csi_call',
        'crash on ',
        'crash after 3 calls',
      ]) {
        expect([phase, kind, mine.some((c) => c.label.includes(kind))]).toEqual([phase, kind, true]);
      }
    }
    expect(pluginFaultScenarioCi.rounds.ci).toBe(CI_FAULT_CASES.length);
  });

  it('prints the one table', () => {
    const leaks = noLeaks();
    leaks.mounts = 2;
    leaks.claims = 1;
    expect(formatLeaks(leaks)).toBe('mounts 2, claims 1');
    expect(
      formatTable([
        { name: 'crash points', rounds: 116, survived: 116, leaks: noLeaks(), failures: [] },
        { name: 'plugin away', rounds: 20, survived: 19, leaks, failures: [] },
      ]),
    ).toBe(
      [
        '| scenario     | rounds | survived | leaks              |',
        '|--------------|-------:|---------:|--------------------|',
        '| crash points |    116 |      116 | 0                  |',
        '| plugin away  |     20 |       19 | mounts 2, claims 1 |',
      ].join('\n'),
    );
  });

  describe('leak counters', () => {
    let root: string;
    beforeEach(() => (root = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-chaos-lib-'))));
    afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

    it('find a process under the dir by its cwd, command line or environment, and no other', async () => {
      const children = [
        spawn('sleep', ['30'], { cwd: root, stdio: 'ignore' }),
        spawn('/bin/sh', ['-c', 'while :; do sleep 0.2; done', root], { stdio: 'ignore' }),
        spawn('sleep', ['30'], { env: { PATH: process.env['PATH'], TASK_DIR: `${root}/task` }, stdio: 'ignore' }),
      ];
      const stranger = spawn('sleep', ['30'], { cwd: os.tmpdir(), stdio: 'ignore' });
      try {
        const pids = children.map((c) => c.pid!);
        await pollUntil('the children to show', () => (pids.every((p) => processesUnder(root).includes(p)) ? true : undefined), 5_000);
        expect(processesUnder(root).sort()).toEqual([...pids].sort());
        expect(processesUnder(root, [pids[0]!]).sort()).toEqual(pids.slice(1).sort());
      } finally {
        for (const c of [...children, stranger]) c.kill('SIGKILL');
      }
      await pollUntil(
        'the children gone',
        () => (children.every((c) => !isAlive(c.pid!) || c.exitCode !== null || c.signalCode !== null) ? true : undefined),
        5_000,
      );
      await pollUntil('no process under the dir', () => (processesUnder(root).length === 0 ? true : undefined), 5_000);
    });

    it('read the mount records and claims a state file still holds', () => {
      const dataDir = path.join(root, 'data');
      const db = openClientState({ path: path.join(dataDir, 'state.db') });
      db.putVolumeMount('a1/data', { allocId: 'a1', name: 'data', desired: 'unmounted', claimed: true, staged: true, published: false });
      db.putVolume('vol-0', { id: 'vol-0', claims: [{ allocId: 'a1' }], controllerPublished: { a1: 'node-1' } });
      db.putVolume('vol-1', { id: 'vol-1', claims: [] });
      db.dispose();
      expect(readStateLeftovers(dataDir)).toEqual({
        records: ['record a1/data: desired unmounted, claimed true, staged true, published false'],
        claims: ['claim of vol-0 by a1', 'controller publish of vol-0 for a1'],
      });
      expect(readStateLeftovers(path.join(root, 'none'))).toEqual({ records: [], claims: [] });
    });
  });
});
