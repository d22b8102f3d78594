// The fault suite in CI, part 1: the agent SIGKILLs itself at every named
// crash point once (the full run, bench/chaos, does each in four variants),
// and kill -9 lands at a few random moments of job run, job stop, volume
// create and delete and a plugin update. After each, a fresh agent takes
// over and everything is stopped: no mount, process, claim, stuck alloc or
// mount record may be left.
import { crashPointScenario, describeFailures, randomKillScenario, runScenario } from './scenarios';
import { formatLeaks } from './leaks';

jest.setTimeout(600_000);

describe('chaos: crash points and kill -9', () => {
  it(`every crash point once (${crashPointScenario.rounds.ci} rounds): the agent dies there, the next one finishes or undoes the step, nothing leaks`, async () => {
    const r = await runScenario(crashPointScenario, crashPointScenario.rounds.ci, { concurrency: 3 });
    expect({ survived: r.survived, leaks: formatLeaks(r.leaks), failures: describeFailures(r) }).toEqual({ survived: r.rounds, leaks: '0', failures: '' });
  });

  it(`kill -9 at random moments (${randomKillScenario.rounds.ci} rounds): nothing leaks`, async () => {
    const r = await runScenario(randomKillScenario, randomKillScenario.rounds.ci, { concurrency: 2 });
    expect({ survived: r.survived, leaks: formatLeaks(r.leaks), failures: describeFailures(r) }).toEqual({ survived: r.rounds, leaks: '0', failures: '' });
  });
});
