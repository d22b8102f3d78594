// The fault suite in CI, part 2: a faulty plugin (no socket, not gRPC, crash
// at start, a hung RPC, garbage, a crash during NodePublishVolume) during
// prerun, restore and postrun. The agent answers its health within a second
// throughout, an event says why, a live workload is never stopped for it,
// and once the plugin is fine again nothing is left over. The full run
// (bench/chaos) takes every fault on every RPC of each phase.
import { CI_FAULT_CASES, describeFailures, pluginFaultScenarioCi, runScenario } from './scenarios';
import { formatLeaks } from './leaks';

jest.setTimeout(600_000);

describe('chaos: plugin faults × phases', () => {
  it(`${CI_FAULT_CASES.join('; ')}: the agent stays responsive, the events say why, nothing leaks`, async () => {
    const r = await runScenario(pluginFaultScenarioCi, pluginFaultScenarioCi.rounds.ci, { concurrency: 2 });
    expect({ survived: r.survived, leaks: formatLeaks(r.leaks), failures: describeFailures(r) }).toEqual({
      survived: r.rounds,
      leaks: '0',
      failures: '',
    });
  });
});
