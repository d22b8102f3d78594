// The fault suite in CI, part 3: the data dir on a full filesystem (a small
// tmpfs filled up) refuses writes with a clear error, applies nothing by
// half and serves normally once space is back; a corrupt state file is
// refused and kept byte for byte, an empty one is said out loud and the
// orphans it left are cleaned with reconcile_orphans; a disk full of a
// task's logs (and the agent's) is survived as a full data dir is.
import { corruptStateScenario, describeFailures, fullDiskScenario, fullLogsScenario, runScenario } from './scenarios';
import { formatLeaks } from './leaks';

jest.setTimeout(600_000);

describe('chaos: storage faults', () => {
  it('a full data dir: writes refused with a clear error, nothing half-applied, normal service when space returns', async () => {
    const r = await runScenario(fullDiskScenario, fullDiskScenario.rounds.ci);
    expect({ survived: r.survived, leaks: formatLeaks(r.leaks), failures: describeFailures(r) }).toEqual({
      survived: r.rounds,
      leaks: '0',
      failures: '',
    });
  });

  it("a disk full of a task's logs and the agent's: health answers, job run gets 507, nothing lost, normal service once the rotated logs are deleted", async () => {
    const r = await runScenario(fullLogsScenario, fullLogsScenario.rounds.ci);
    expect({ survived: r.survived, leaks: formatLeaks(r.leaks), failures: describeFailures(r) }).toEqual({
      survived: r.rounds,
      leaks: '0',
      failures: '',
    });
  });

  it('a corrupt state file is refused and preserved; an empty one is reported and its orphans cleaned', async () => {
    const r = await runScenario(corruptStateScenario, corruptStateScenario.rounds.ci, { concurrency: 2 });
    expect({ survived: r.survived, leaks: formatLeaks(r.leaks), failures: describeFailures(r) }).toEqual({
      survived: r.rounds,
      leaks: '0',
      failures: '',
    });
  });
});
