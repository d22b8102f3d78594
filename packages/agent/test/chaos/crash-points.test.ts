// The fault suite in CI, part 1: the agent SIGKILLs itself at every named
// crash point once (the full run, bench/chaos, does each in four variants;
// the points in a volume create, expand or delete are a test of their own),
// and kill -9 lands at a few random moments of job run, job stop, volume
// create and delete and a plugin update. After each, a fresh agent takes
// over and everything is stopped: no mount, process, claim, stuck alloc or
// mount record may be left.
import { crashCase, crashPointScenario, describeFailures, randomKillScenario, runScenario } from './scenarios';
import { formatLeaks } from './leaks';

jest.setTimeout(600_000);

/** The CI rounds (each point once) whose point is in a volume create, expand or delete, and the others. */
const ciRounds = Array.from({ length: crashPointScenario.rounds.ci }, (_, i) => i);
const isVolumeOpRound = (i: number) => /^catalog\.(create|expand|delete)\./.test(crashCase(i).point);
const volumeOpRounds = ciRounds.filter(isVolumeOpRound);
const mountRounds = ciRounds.filter((i) => !isVolumeOpRound(i));

describe('chaos: crash points and kill -9', () => {
  it(`every crash point of job run, job stop, plugin update and remount once (${mountRounds.length} rounds): the agent dies there, the next one finishes or undoes the step, nothing leaks`, async () => {
    const r = await runScenario(crashPointScenario, crashPointScenario.rounds.ci, { concurrency: 3, indices: mountRounds });
    expect({ survived: r.survived, leaks: formatLeaks(r.leaks), failures: describeFailures(r) }).toEqual({
      survived: r.rounds,
      leaks: '0',
      failures: '',
    });
  });

  it(`a crash before and after CreateVolume, ControllerExpandVolume and DeleteVolume (${volumeOpRounds.length} rounds): the next agent settles the operation and says so; the catalog and the plugin agree`, async () => {
    expect(volumeOpRounds.length).toBe(6);
    const r = await runScenario(crashPointScenario, crashPointScenario.rounds.ci, { concurrency: 3, indices: volumeOpRounds });
    expect({ survived: r.survived, leaks: formatLeaks(r.leaks), failures: describeFailures(r) }).toEqual({
      survived: r.rounds,
      leaks: '0',
      failures: '',
    });
  });

  it(`kill -9 at random moments (${randomKillScenario.rounds.ci} rounds): nothing leaks`, async () => {
    const r = await runScenario(randomKillScenario, randomKillScenario.rounds.ci, { concurrency: 2 });
    expect({ survived: r.survived, leaks: formatLeaks(r.leaks), failures: describeFailures(r) }).toEqual({
      survived: r.rounds,
      leaks: '0',
      failures: '',
    });
  });
});
