// The fault suite's disk-full-of-logs round (issue 25, item 6): the data dir
// is a small tmpfs that also holds the agent's own log (debug, so every
// request writes to it), and a chatty task's output fills it — more than
// the disk holds, less than Nomad's default log limits (10 × 10 MB) allow.
// On the full disk the agent must keep answering (health, reads), refuse a
// job run it cannot save with 507 and a reason, apply nothing by half, and
// leave the running workload alone; once the operator deletes the task's
// rotated logs, normal service (a job run places and runs) with nothing
// stored lost, the agent's dropped log lines said, and 0 leaks.
//
// scenarios.ts hands in its round helpers, so this file needs nothing of it
// (the two never import each other).
import * as fs from 'fs';
import * as path from 'path';
import { jobToNomadJson, parseJobspec } from '@csiplug/jobspec';
import { ApiClient } from '@csiplug/api';
import { pollUntil } from '../support/agent-process';
import { type ChaosAgent, type ChaosAgentOptions, workloadUp } from './chaos-agent';

/** What scenarios.ts hands in; `Outcome` is its RoundOutcome. */
export interface RoundHelpers<Outcome> {
  withAgent(
    label: string,
    options: ChaosAgentOptions,
    body: (a: ChaosAgent, problems: string[]) => Promise<void>,
    prepare?: (a: ChaosAgent) => void,
  ): Promise<Outcome>;
  check(cond: boolean, problems: string[], message: string): boolean;
  fillUp(file: string): void;
  mountTmpfs(a: ChaosAgent, size: string): void;
}

/** The tmpfs the round's data dir is: smaller than the chatty task writes. */
const DISK = '48m';
/** What the chatty task writes before it sleeps: more than DISK holds, less than 10 × 10 MB. */
const CHATTY_BYTES = 64 * 1024 * 1024;

function chattyJobHcl(isolated: boolean): string {
  return `job "chatty" {
  group "app" {
    task "yes" {
      driver = "${isolated ? 'exec' : 'raw_exec'}"
      config {
        command = "/bin/sh"
        args    = ["-c", "yes csiplug | head -c ${CHATTY_BYTES}; exec sleep 3600"]
      }
      kill_timeout = "1s"
    }
  }
}`;
}

/** Bytes free on the filesystem of `dir`. */
function freeBytes(dir: string): number {
  const s = fs.statfsSync(dir);
  return s.bavail * s.bsize;
}

/** The round as a scenario of scenarios.ts (its Scenario shape). */
export function fullLogsDiskScenario<Outcome>(h: RoundHelpers<Outcome>): {
  name: string;
  rounds: { ci: number; full: number };
  labelOf(i: number): string;
  round(i: number): Promise<Outcome>;
} {
  const label = (i: number) => `disk full of logs (round ${i})`;
  return {
    name: 'storage: disk full of logs',
    rounds: { ci: 1, full: 3 },
    labelOf: label,
    round: (i) =>
      h.withAgent(
        label(i),
        { logFile: 'data/agent.log', logLevel: 'debug' },
        async (a, problems) => {
          await a.start();
          const agentPid = a.proc!.pid;
          await a.runPlugin();
          await a.createVolume('vol-0');
          await a.createVolume('vol-1');
          const first = await a.runWorkload('0', 'vol-0');
          const [up] = await a.waitWorkloadsUp([first]);
          const { allocIds } = await a.api.runJob(jobToNomadJson(await parseJobspec(chattyJobHcl(a.isolated), 'chatty.hcl')));
          const taskDir = path.join(a.dataDir, 'allocs', allocIds[0]!, 'yes');
          // The task's logs fill the disk; a filler takes what a page of a log file could not.
          await pollUntil('the chatty task to fill the disk', () => (freeBytes(a.dataDir) < 1024 * 1024 ? true : undefined));
          const filler = path.join(a.dataDir, 'filler');
          h.fillUp(filler);
          const api = new ApiClient({ address: a.api.address, timeoutMs: 30_000 });
          try {
            const health = await a.watchHealth(2_000, { limitMs: 10_000 });
            h.check(health.late.length === 0, problems, `health did not answer on a disk full of logs: ${health.late.join('; ')}`);
            // Reads answer too, each one a debug line the disk refuses: more than the last page of the agent's log file holds (4 KiB).
            for (let n = 0; n < 50; n++) await api.listJobs();
            const jobsBefore = (await api.listJobs()).map((j) => j.id).sort();
            const refused = await a.runWorkload('1', 'vol-1').then(
              () => undefined,
              (err: Error & { status?: number }) => err,
            );
            if (h.check(!!refused, problems, 'job run answered OK on a disk full of logs')) {
              h.check(
                refused!.status === 507,
                problems,
                `job run on a disk full of logs answered ${refused!.status}, not 507: ${refused!.message}`,
              );
              h.check(
                /filesystem it is on is full/.test(refused!.message),
                problems,
                `the refusal does not say the disk is full: ${refused!.message}`,
              );
            }
            h.check(
              JSON.stringify((await api.listJobs()).map((j) => j.id).sort()) === JSON.stringify(jobsBefore),
              problems,
              'the refused job was half applied: it is listed',
            );
            h.check(
              (await api.getVolume('vol-1')).claims.length === 0,
              problems,
              'the refused job was half applied: its volume is claimed',
            );
            h.check(workloadUp(await api.getAlloc(first)), problems, 'the running workload suffered from the disk full of logs');
            h.check(a.running && a.proc!.pid === agentPid, problems, 'the agent died on the disk full of logs');
          } finally {
            // The operator's way out: the filler and the task's older (rotated) logs go.
            fs.rmSync(filler, { force: true });
            for (const f of fs.existsSync(taskDir) ? fs.readdirSync(taskDir) : [])
              if (/^std(out|err)\.log\.\d+$/.test(f)) fs.rmSync(path.join(taskDir, f), { force: true });
          }
          // Space is back: normal service, nothing stored lost, the agent alive, its dropped lines said once.
          const second = await a
            .runWorkload('1', 'vol-1')
            .catch((err: Error) => (problems.push(`job run once space returned: ${err.message}`), undefined));
          if (second) await a.waitWorkloadsUp([second]).catch((err: Error) => problems.push(`once space returned: ${err.message}`));
          h.check(
            fs.readFileSync(path.join(up!.volumes['data']!.hostPath, 'owner.txt'), 'utf8').trim() === first,
            problems,
            'owner.txt of the first workload changed',
          );
          h.check(workloadUp(await a.api.getAlloc(first)), problems, 'the first workload is not running once space returned');
          h.check(
            (await a.api.listJobs()).some((j) => j.id === 'chatty'),
            problems,
            'the chatty job was lost',
          );
          h.check(a.running && a.proc!.pid === agentPid, problems, 'the agent died once space returned');
          const said = await pollUntil(
            'the agent to say what it dropped',
            () => (/log line\(s\) could not be written/.test(a.log) ? true : undefined),
            10_000,
          ).catch(() => false);
          h.check(said === true, problems, 'the agent never said how many log lines it dropped');
        },
        (a) => h.mountTmpfs(a, DISK),
      ),
  };
}
