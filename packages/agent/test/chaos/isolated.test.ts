// The fault suite in CI, part 5: the CI rounds of every scenario again, with
// the plugin and the workloads isolated on runc (driver = "exec"): the
// plugin mounts inside its container through the bidirectional bind of its
// staging/publish base, a kill -9 of runc leaves a container for the
// executor or the next agent to remove, and a left container counts as a
// leaked process. `node bench/chaos/run.js --isolated` runs the full counts.
import { ChaosAgent } from './chaos-agent';
import { type Scenario, ALL_SCENARIOS, describeFailures, pluginFaultScenarioCi, runScenario } from './scenarios';
import { formatLeaks } from './leaks';

jest.setTimeout(900_000);

beforeAll(() => {
  ChaosAgent.isolatedByDefault = true;
});

const CI_SCENARIOS: readonly Scenario[] = ALL_SCENARIOS.map((s) => (s.name === 'plugin faults' ? pluginFaultScenarioCi : s));

describe('chaos, isolated on runc: plugin and workloads with driver = "exec"', () => {
  it.each(CI_SCENARIOS.map((s) => [s.name, s] as const))(
    '%s: every CI round survives, nothing leaks (no mount, process, container, claim or record)',
    async (_name, scenario) => {
      const r = await runScenario(scenario, scenario.rounds.ci, { concurrency: scenario.name === 'crash points' ? 3 : 2 });
      expect({ survived: r.survived, leaks: formatLeaks(r.leaks), failures: describeFailures(r) }).toEqual({
        survived: r.rounds,
        leaks: '0',
        failures: '',
      });
    },
  );
});
