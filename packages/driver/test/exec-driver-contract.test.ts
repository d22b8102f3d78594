// The exec driver held to the TaskDriver contract with real processes,
// started through the compiled executor this package ships
// (dist/executor.js, the driver's default: the test target builds it first).
import { MemoryLogger, RealClock } from '@csiplug/core';
import { ExecDriver } from '../src/exec-driver';
import { readProcStat } from '../src/proc';
import { describeTaskDriverContract } from '../src/testing/conformance';

/** Kills by pid, only if the pid still is the process that was started (and its group, if it leads one). */
function killIfSame(pid: number, startTime: string): void {
  const stat = readProcStat(pid);
  if (!stat || stat.startTime !== startTime) return;
  try {
    process.kill(stat.pgrp === pid ? -pid : pid, 'SIGKILL');
  } catch {
    // gone already
  }
}

describeTaskDriverContract('ExecDriver', () => ({
  driver: new ExecDriver(new RealClock(), new MemoryLogger(), { pollInterval: 100 }),
  exitsWith: (code) => ({ command: '/bin/sh', args: ['-c', `exit ${code}`] }),
  runsUntilSignalled: () => ({ command: '/bin/sh', args: ['-c', 'exec sleep 30'] }),
  cleanup: (handles) => {
    for (const h of handles) {
      killIfSame(h.pid, h.startTime);
      killIfSame(h.executorPid, h.executorStartTime);
    }
  },
}));
