// The executor: a small process that is a task's parent so that the task
// outlives the agent. Run as `node executor.js <spec-file>`, detached in its
// own session by the agent. It starts the task in a new session and process
// group with stdout/stderr appended to the task's log files (rotated as the
// spec's logs limits say: rotating-log.ts), records the
// task's pid and start time (pid.json), waits for it, records how it ended
// (exit.json), and exits. A restarted agent finds the task again through
// these files and verifies it by pid and start time.
//
// It starts often and must start fast: node built-ins only (and the two
// sibling files that use node built-ins only). No DI, no @csiplug imports.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, writeSync } from 'node:fs';
import type { Readable } from 'node:stream';
import {
  type ExecutorExitRecord,
  type ExecutorPidRecord,
  type ExecutorSpec,
  containerStateExists,
  readJsonFile,
  runcDeleteArgs,
  runcRunArgs,
  writeJsonAtomic,
} from './executor-protocol';
import { processStartTime } from './proc';
import { RotatingLog, openTaskLog } from './rotating-log';

/** Signals that, sent to the executor, are passed on to the task: whoever kills the executor means the task. */
const FORWARDED_SIGNALS: NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGQUIT', 'SIGUSR2'];

function log(message: string): void {
  // stderr is the task's .executor/executor.log (the agent opens it for us).
  // A line its disk has no room for is lost; it never ends the task's parent.
  try {
    writeSync(2, `${new Date().toISOString()} executor[${process.pid}]: ${message}\n`);
  } catch {
    // nowhere left to say it
  }
}

/** How long the executor waits, once its task has exited, for the last of its output (a process that left the task's group may hold the pipe open). */
const LAST_OUTPUT_WAIT_MS = 2_000;

/** Writes what `from` (the task's end of a pipe) yields to `to` until it ends. */
function pump(from: Readable | null, to: RotatingLog): Promise<void> {
  return new Promise((resolve) => {
    if (!from) return resolve();
    from.on('data', (chunk: Buffer) => to.write(chunk));
    from.on('error', (e) => log(`reading the task's output: ${e.message}`));
    from.on('close', () => {
      to.close();
      resolve();
    });
  });
}

function readSpec(specPath: string): ExecutorSpec {
  const spec = readJsonFile<ExecutorSpec>(specPath);
  if (!spec) throw new Error(`spec file ${specPath} does not exist`);
  const strings: (keyof ExecutorSpec)[] = ['command', 'cwd', 'stdoutPath', 'stderrPath', 'pidPath', 'exitPath'];
  for (const key of strings)
    if (typeof spec[key] !== 'string' || !spec[key]) throw new Error(`spec file ${specPath}: "${key}" must be a non-empty string`);
  if (!Array.isArray(spec.args) || spec.args.some((a) => typeof a !== 'string'))
    throw new Error(`spec file ${specPath}: "args" must be an array of strings`);
  if (typeof spec.env !== 'object' || spec.env === null) throw new Error(`spec file ${specPath}: "env" must be an object`);
  if (spec.logs !== undefined) {
    for (const key of ['maxFiles', 'maxFileSizeMB'] as const)
      if (!Number.isInteger(spec.logs?.[key]) || spec.logs[key] < 1)
        throw new Error(`spec file ${specPath}: "logs.${key}" must be a whole number of at least 1`);
  }
  if (spec.runc !== undefined) {
    for (const key of ['binary', 'root', 'id', 'bundle'] as const)
      if (typeof spec.runc?.[key] !== 'string' || !spec.runc[key])
        throw new Error(`spec file ${specPath}: "runc.${key}" must be a non-empty string`);
  }
  return spec;
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  // The task leads its own process group: signalling the group reaches
  // whatever it started too (a shell's children, say).
  try {
    process.kill(-pid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') log(`could not send ${signal} to process group ${pid}: ${(err as Error).message}`);
  }
}

export function runExecutor(specPath: string): void {
  const spec = readSpec(specPath);
  const recordStartError = (message: string): void => {
    log(`could not start ${spec.command}: ${message}`);
    const record: ExecutorExitRecord = {
      version: 1,
      pid: 0,
      startTime: '',
      exitCode: null,
      signal: null,
      finishedAt: Date.now(),
      startError: message,
    };
    writeJsonAtomic(spec.exitPath, record);
  };

  // The agent's terminal is not ours: we run in our own session, and a
  // stray SIGHUP must not end the task's parent. Signals meant to end the
  // executor end the task instead, so its exit is still recorded. Both are
  // set up before anything else: the agent may signal as soon as pid.json
  // exists, and a default SIGTERM would kill us and orphan the task.
  let taskPid: number | undefined;
  process.on('SIGHUP', () => log('ignoring SIGHUP'));
  for (const signal of FORWARDED_SIGNALS) {
    process.on(signal, () => {
      if (taskPid !== undefined) signalGroup(taskPid, signal);
      else log(`received ${signal} but no task runs`);
    });
  }

  // Only the agent (and root) may read a task's output: plugins print
  // secrets, and anyone who can list processes learns the alloc ids. Logs
  // an older executor made with a wider mode are tightened too.
  // Never through a symlink a task may have put in place of its log.
  // With limits (every spec this agent writes), the task writes into pipes
  // and this executor writes its logs, rotated; a spec of an older agent
  // gives the task the files themselves.
  let out: number | 'pipe';
  let err: number | 'pipe';
  let logs: { stdout: RotatingLog; stderr: RotatingLog } | undefined;
  try {
    if (spec.logs) {
      logs = { stdout: new RotatingLog(spec.stdoutPath, spec.logs, log), stderr: new RotatingLog(spec.stderrPath, spec.logs, log) };
      out = err = 'pipe';
    } else {
      out = openTaskLog(spec.stdoutPath, log);
      err = openTaskLog(spec.stderrPath, log);
    }
  } catch (e) {
    recordStartError(`cannot open the task's log: ${(e as Error).message}`);
    process.exit(1);
  }
  // An isolated task is `runc run` of its bundle: runc is the process this
  // executor starts, watches and signals; the container's own environment
  // is in the bundle, runc's is just enough to run it.
  const runc = spec.runc;
  const command = runc ? runc.binary : spec.command;
  const args = runc ? runcRunArgs(runc) : spec.args;
  let child: ChildProcess;
  try {
    child = spawn(command, args, {
      cwd: runc ? runc.bundle : spec.cwd,
      env: runc ? { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } : spec.env,
      stdio: ['ignore', out, err],
      // Own session and process group, so that the agent can stop the task
      // and its children as one, and the task ignores our terminal too.
      detached: true,
    });
  } catch (e) {
    recordStartError((e as Error).message);
    process.exit(1);
  } finally {
    // The task holds its own copies of the log fds.
    if (typeof out === 'number') closeSync(out);
    if (typeof err === 'number') closeSync(err);
  }
  // Whatever the task writes is written to its logs as it comes (a full disk drops it: RotatingLog).
  const drained = logs ? Promise.all([pump(child.stdout, logs.stdout), pump(child.stderr, logs.stderr)]) : Promise.resolve([]);

  const pid = child.pid;
  taskPid = pid;
  if (pid === undefined) {
    // Spawning failed (no such command, no such cwd…): 'error' says why.
    child.once('error', (e) => {
      recordStartError(e.message);
      process.exit(1);
    });
    return;
  }

  // The task cannot have been reaped yet (that happens on a later turn of
  // the event loop), so its /proc entry is there to read.
  const startTime = processStartTime(pid) ?? '';
  const pidRecord: ExecutorPidRecord = {
    version: 1,
    executorPid: process.pid,
    executorStartTime: processStartTime(process.pid) ?? '',
    pid,
    startTime,
    startedAt: Date.now(),
  };
  try {
    writeJsonAtomic(spec.pidPath, pidRecord);
  } catch (e) {
    // A task no record names (a full disk) could never be found, stopped or
    // told apart from a second copy the agent would start: it does not run.
    const why = `could not record the task's pid in ${spec.pidPath}: ${(e as Error).message}; the task (pid ${pid}) was killed`;
    log(why);
    signalGroup(pid, 'SIGKILL');
    child.once('exit', () => {
      try {
        recordStartError(why);
      } catch (recordErr) {
        log(`could not record the start error either: ${(recordErr as Error).message}`);
      }
      process.exit(1);
    });
    return;
  }

  child.on('error', (e) => log(`task ${pid}: ${e.message}`));
  child.on('exit', (exitCode, signal) => {
    // The executor's last act: whatever fails on the way out is logged and ends it with 1, never left unhandled.
    (async () => {
      // The leader is gone; what it left behind in its group goes with it, so
      // nothing outlives its task. The group id cannot have been reused yet:
      // the kernel keeps a pid number while a group of that id has members.
      signalGroup(pid, 'SIGKILL');
      // Its last output is in the logs before its exit is recorded; a process that left the group and holds the pipe is not waited for long.
      await Promise.race([drained, new Promise((resolve) => setTimeout(resolve, LAST_OUTPUT_WAIT_MS))]);
      // runc removes its container when the task ends; a runc that was killed
      // leaves the container (its own session) running: it goes now, cgroup and all.
      if (runc && containerStateExists(runc)) {
        const deleted = spawnSync(runc.binary, runcDeleteArgs(runc), {
          stdio: ['ignore', 'ignore', 'pipe'],
          timeout: 10_000,
          env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
        });
        if (deleted.status !== 0)
          log(
            `runc delete of container ${runc.id} failed (${deleted.error?.message ?? `exit ${deleted.status}`}): ${deleted.stderr?.toString().trim() ?? ''}`,
          );
      }
      const record: ExecutorExitRecord = { version: 1, pid, startTime, exitCode, signal, finishedAt: Date.now() };
      try {
        writeJsonAtomic(spec.exitPath, record);
      } catch (e) {
        log(`could not record the exit of task ${pid} (${JSON.stringify(record)}): ${(e as Error).message}`);
        process.exit(1);
      }
      process.exit(0);
    })().catch((e: unknown) => {
      log(`could not finish task ${pid} after its exit: ${(e as Error).stack ?? String(e)}`);
      process.exit(1);
    });
  });
}

if (require.main === module) {
  const specPath = process.argv[2];
  if (!specPath) {
    log('usage: node executor.js <spec-file>');
    process.exit(2);
  }
  try {
    runExecutor(specPath);
  } catch (e) {
    log(`failed: ${(e as Error).stack ?? String(e)}`);
    process.exit(1);
  }
}
