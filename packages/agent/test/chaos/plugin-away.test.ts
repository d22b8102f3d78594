// The fault suite in CI, part 4: kill -9 of the agent, its plugin kept away
// for 2–5 × plugin_wait_restore, the agent back: no live workload stopped,
// no mount lost, every file intact; once the plugin returns, job stop
// unmounts cleanly. The full run (bench/chaos) does 20 rounds.
import { describeFailures, pluginAwayScenario, runScenario } from './scenarios';
import { formatLeaks } from './leaks';

jest.setTimeout(600_000);

describe('chaos: plugin away across an agent restart', () => {
  it(`${pluginAwayScenario.rounds.ci} rounds: 0 workloads stopped, 0 mounts lost, files intact, clean unmount once the plugin is back`, async () => {
    const r = await runScenario(pluginAwayScenario, pluginAwayScenario.rounds.ci, { concurrency: 2 });
    expect({ survived: r.survived, leaks: formatLeaks(r.leaks), failures: describeFailures(r) }).toEqual({
      survived: r.rounds,
      leaks: '0',
      failures: '',
    });
  });
});
