// TaskProbe: what the exec driver knows of one task run, read from the
// executor's records in its task dir and from /proc — by pid and start time,
// never by pid alone. A transient fault of the agent's own process while
// reading (EMFILE, say) makes the state "unknown", never "exited".
import { errorMessage, isTransientFsError, type IClock, type ILogger } from '@csiplug/core';
import type { ExitResult, TaskHandle } from './driver';
import { type ExecutorExitRecord, type ExecutorPaths, type ExecutorPidRecord, executorPaths } from './executor-protocol';
import type { FaultLog } from './fault-log';
import { type ProcStat, decodeWaitStatus, isFinishedState, isSameProcess } from './proc';

/** What one check of a task found; 'unknown' when a fault of the agent itself kept it from finding out. */
export type Probe =
  { state: 'running' } | { state: 'exiting' } | { state: 'exited'; exit: ExitResult } | { state: 'unknown'; cause: unknown };

export class TaskProbe {
  constructor(
    private readonly clock: IClock,
    private readonly log: ILogger,
    private readonly readStat: (pid: number) => ProcStat | undefined,
    private readonly readRecordFile: (file: string) => unknown,
  ) {}

  /** The exit of the handle's task once it has ended; undefined while it runs or cannot be checked. */
  exitOf(handle: TaskHandle, faults: FaultLog): ExitResult | undefined {
    const probe = this.probe(handle);
    if (probe.state === 'unknown') {
      faults.fault('wait', probe.cause);
      return undefined;
    }
    faults.recovered();
    if (probe.state !== 'exited') return undefined;
    return probe.exit;
  }

  /** Never throws for a transient fault of the agent itself: that is { state: 'unknown' }. */
  probe(handle: TaskHandle): Probe {
    try {
      return this.probeOrThrow(handle);
    } catch (err) {
      if (isTransientFsError(err)) return { state: 'unknown', cause: err };
      throw err;
    }
  }

  /**
   * For restore: a check that fails for any reason (EACCES under an LSM, a
   * malformed stat line) says nothing about the task, so it is "unknown"
   * too — recover() then keeps the task and wait() learns the truth.
   */
  probeNeverThrows(handle: TaskHandle): Probe {
    try {
      return this.probe(handle);
    } catch (err) {
      return { state: 'unknown', cause: err };
    }
  }

  private probeOrThrow(handle: TaskHandle): Probe {
    const paths = executorPaths(handle.taskDir);
    const recorded = this.recordedExit(handle, paths);
    if (recorded) return { state: 'exited', exit: recorded };
    if (this.isSame(handle.pid, handle.startTime)) return { state: 'running' };
    const executorAlive = this.isSame(handle.executorPid, handle.executorStartTime);
    const pidRecord = this.readRecord<ExecutorPidRecord>(paths.pid);
    const executorRunsIt = executorAlive && pidRecord?.pid === handle.pid && pidRecord.startTime === handle.startTime;
    if (executorRunsIt) return { state: 'exiting' };
    // The executor may have written the record and exited between our reads.
    const late = this.recordedExit(handle, paths);
    if (late) return { state: 'exited', exit: late };
    return { state: 'exited', exit: this.unknownExit(handle, executorAlive) };
  }

  private recordedExit(handle: TaskHandle, paths: ExecutorPaths): ExitResult | undefined {
    const record = this.readRecord<ExecutorExitRecord>(paths.exit);
    if (!record || record.pid !== handle.pid || record.startTime !== handle.startTime) return undefined;
    return { exitCode: record.exitCode, signal: record.signal, finishedAt: record.finishedAt };
  }

  /** The task ended with no executor to record it. */
  private unknownExit(handle: TaskHandle, executorAlive: boolean): ExitResult {
    const fields = { allocId: handle.allocId, taskName: handle.taskName, taskPid: handle.pid, executorPid: handle.executorPid };
    // A zombie nobody has reaped yet still holds its wait status.
    const stat = this.readStat(handle.pid);
    if (stat && stat.startTime === handle.startTime && isFinishedState(stat.state) && stat.exitStatus !== undefined) {
      this.log.warn('task exited after its executor died; read its exit status from the unreaped process', fields);
      return { ...decodeWaitStatus(stat.exitStatus), finishedAt: this.clock.now() };
    }
    const why = executorAlive
      ? `its executor (pid ${handle.executorPid}) does not run it (the handle does not match the executor's record)`
      : `its executor (pid ${handle.executorPid}) ended without recording how it exited`;
    const error = `the exit status of task "${handle.taskName}" of alloc ${handle.allocId} is unknown: no process with pid ${handle.pid} and start time ${handle.startTime} is running and ${why}`;
    this.log.warn('task exit status unknown', { ...fields, error });
    return { exitCode: null, signal: null, finishedAt: this.clock.now(), error };
  }

  /** Whether `pid` is the live process that started at `startTime`; throws when that cannot be told just now. */
  isSame(pid: number, startTime: string): boolean {
    return isSameProcess(pid, startTime, this.readStat);
  }

  /** Like isSame, but true when it cannot be told: for waits and timers that must not end on a guess. */
  isSameOrUnknown(pid: number, startTime: string): boolean {
    try {
      return this.isSame(pid, startTime);
    } catch (err) {
      this.log.debug('cannot check a process just now; taking it as alive', { targetPid: pid, err: errorMessage(err) });
      return true;
    }
  }

  /**
   * The record in `file`, or undefined when there is none or it is damaged.
   * Throws when it cannot be read for a transient fault of the agent itself:
   * "no record" then would be a guess.
   */
  readRecord<T>(file: string): T | undefined {
    try {
      return this.readRecordFile(file) as T | undefined;
    } catch (err) {
      if (isTransientFsError(err)) throw err;
      // Records are written atomically, so this is damage, not a race.
      this.log.warn('ignoring an unreadable executor record', { file, err: errorMessage(err) });
      return undefined;
    }
  }

  /** Whether the executor's pid record in the handle's task dir still names the handle's run (false when it names another, is gone, or cannot be read). */
  isLatestRun(handle: TaskHandle): boolean {
    try {
      const record = this.readRecord<ExecutorPidRecord>(executorPaths(handle.taskDir).pid);
      return record !== undefined && record.pid === handle.pid && record.startTime === handle.startTime;
    } catch {
      return false;
    }
  }
}
