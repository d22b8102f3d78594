// Nomad's job write request bodies: what is taken, ignored and refused.
import { ValidationError } from '@csiplug/core';
import { CREATE_JOB_PAYLOAD_TRIMMED, PARSE_JOB_PAYLOAD } from '../../test/fixtures/nomad-json/nomad-docs-examples';
import { readJobPlanRequest, readJobRegisterRequest, readJobsParseRequest } from './job-requests';

function refusal(read: () => unknown): string {
  try {
    read();
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('readJobRegisterRequest', () => {
  it("takes jobs.mdx's Create Job payload (trimmed) and what Nomad's Go client adds to every write", () => {
    const { job } = readJobRegisterRequest({ ...CREATE_JOB_PAYLOAD_TRIMMED, Region: '', Namespace: '', SecretID: '' });
    expect(job.id).toBe('cache');
  });

  it('ignores the documented options whose meaning holds here, and refuses the ones it would drop', () => {
    const body = {
      ...CREATE_JOB_PAYLOAD_TRIMMED,
      PolicyOverride: true,
      JobModifyIndex: 7,
      EvalPriority: 60,
      Submission: { Source: 'job "cache" {}' },
    };
    expect(readJobRegisterRequest(body).job.id).toBe('cache');
    expect(refusal(() => readJobRegisterRequest({ ...CREATE_JOB_PAYLOAD_TRIMMED, EnforceIndex: true, JobModifyIndex: 3 }))).toMatch(
      /^EnforceIndex is not supported: /,
    );
    expect(refusal(() => readJobRegisterRequest({ ...CREATE_JOB_PAYLOAD_TRIMMED, PreserveCounts: true }))).toMatch(
      /^PreserveCounts is not supported: /,
    );
    expect(() => readJobRegisterRequest({ ...CREATE_JOB_PAYLOAD_TRIMMED, EnforceIndex: false, PreserveCounts: false })).not.toThrow();
  });

  it("hands the Job's Stop to the route (a stopped job sent back), the job read without it; a plan refuses it, saying how to start", () => {
    const { Job } = CREATE_JOB_PAYLOAD_TRIMMED as { Job: Record<string, unknown> };
    const stopped = readJobRegisterRequest({ Job: { ...Job, Stop: true } });
    expect([stopped.job.id, stopped.stop]).toEqual(['cache', true]);
    expect(readJobRegisterRequest({ Job: { ...Job, Stop: false } }).stop).toBe(false);
    expect(refusal(() => readJobPlanRequest({ Job: { ...Job, Stop: true } }))).toMatch(
      /^Job\.Stop is not supported: .*set Stop to false to start it/,
    );
  });

  it("refuses another field, csiplug's old body, and a body without Job", () => {
    expect(refusal(() => readJobRegisterRequest({ ...CREATE_JOB_PAYLOAD_TRIMMED, Force: true }))).toMatch(
      /^Force is not a field csiplug knows here \(the fields it reads: Job, PolicyOverride\)$/,
    );
    expect(refusal(() => readJobRegisterRequest({ Job: { job: { web: { group: {} } } } }))).toMatch(
      /^Job\.job is not a field csiplug knows here/,
    );
    expect(refusal(() => readJobRegisterRequest({}))).toMatch(/^Job is required: /);
    expect(refusal(() => readJobRegisterRequest([]))).toBe('the request body must be an object (got [])');
  });
});

describe('readJobPlanRequest', () => {
  it('takes the job and Diff (false unless given)', () => {
    expect(readJobPlanRequest({ ...CREATE_JOB_PAYLOAD_TRIMMED, Diff: true }).diff).toBe(true);
    expect(readJobPlanRequest(CREATE_JOB_PAYLOAD_TRIMMED).diff).toBe(false);
    expect(refusal(() => readJobPlanRequest({ ...CREATE_JOB_PAYLOAD_TRIMMED, Diff: 'yes' }))).toBe(
      'Diff must be true or false (got "yes")',
    );
  });
});

describe('readJobsParseRequest', () => {
  it("takes jobs.mdx's Parse Job payload", () => {
    expect(readJobsParseRequest(PARSE_JOB_PAYLOAD)).toEqual({ jobHCL: PARSE_JOB_PAYLOAD.JobHCL, canonicalize: true });
  });

  it('refuses HCL variables and a missing JobHCL', () => {
    expect(refusal(() => readJobsParseRequest({ ...PARSE_JOB_PAYLOAD, Variables: 'x = 1' }))).toMatch(/^Variables is not supported: /);
    expect(refusal(() => readJobsParseRequest({ Canonicalize: true }))).toBe("JobHCL is required: the jobspec's HCL text");
  });
});
