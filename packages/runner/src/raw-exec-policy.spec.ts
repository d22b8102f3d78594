// raw_exec refused while the agent config does not enable it: a job at run, a task at its start.
import { ValidationError } from '@csiplug/core';
import { parseJobspec } from '@csiplug/jobspec';
import { RAW_EXEC_DISABLED, assertRawExecAllowed, rawExecRefusal } from './raw-exec-policy';

const job = (driver: string) =>
  parseJobspec(
    `job "j" {\n  group "g" {\n    task "isolated" {\n      driver = "exec"\n      config {\n        command = "/bin/true"\n      }\n    }\n    task "t" {\n      driver = "${driver}"\n      config {\n        command = "/bin/true"\n      }\n    }\n  }\n}\n`,
    'j.hcl',
  );

describe('raw_exec policy', () => {
  it('refuses a job with a raw_exec task while disabled, naming it and saying how to enable the driver', async () => {
    const j = await job('raw_exec');
    expect(() => assertRawExecAllowed(j, false)).toThrow(ValidationError);
    expect(() => assertRawExecAllowed(j, false)).toThrow(`job "j" group "g" task "t": ${RAW_EXEC_DISABLED}`);
    expect(RAW_EXEC_DISABLED).toContain('plugin "raw_exec" { config { enabled = true } }');
    expect(() => assertRawExecAllowed(j, true)).not.toThrow();
    const isolated = await job('exec');
    expect(() => assertRawExecAllowed(isolated, false)).not.toThrow();
  });

  it('refuses a host-process task at its start while disabled, asked at each start', () => {
    let enabled = false;
    const refusal = rawExecRefusal(false, () => enabled);
    expect(refusal()).toBe(RAW_EXEC_DISABLED);
    enabled = true;
    expect(refusal()).toBeUndefined();
    expect(rawExecRefusal(true, () => false)()).toBeUndefined();
  });
});
