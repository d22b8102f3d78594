// The FakeAgentService fails like the agent it stands in for: an unknown job
// or alloc is the service interface's NotFoundError (the agent's own) (ENOT_FOUND, HTTP 404), so a test
// against the fake sees the errors a client of the real agent sees.
import { NotFoundError } from '../service-errors';
import { statusForError } from '../api-error';
import { validateJob } from '@csiplug/jobspec';
import { FakeAgentService } from './fake-agent-service';

const job = () =>
  validateJob({
    job: {
      web: { group: { app: { count: 1, task: { main: { driver: 'raw_exec', config: { command: '/bin/sleep', args: ['100'] } } } } } },
    },
  });

describe('FakeAgentService', () => {
  it("stopping an unknown job throws the agent's NotFoundError", async () => {
    const fake = new FakeAgentService();
    const err = await fake.stopJob('ghost').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err).toMatchObject({ code: 'ENOT_FOUND', message: 'job "ghost" not found' });
    expect(statusForError(err)).toBe(404);
  });

  it("logs of an unknown alloc, or of a task the alloc does not have, throw the agent's NotFoundError", async () => {
    const fake = new FakeAgentService();
    const { allocIds } = await fake.runJob(job());
    const id = allocIds[0]!;
    fake.logs.set(`${id}/main/stdout`, 'hello\n');
    const slice = await fake.allocLogs(id, 'main', 'stdout');
    slice.stream.destroy();
    expect(slice).toMatchObject({ size: 6, start: 0, length: 6 });
    await expect(fake.allocLogs('nope', 'main', 'stdout')).rejects.toMatchObject({ code: 'ENOT_FOUND', message: 'alloc "nope" not found' });
    await expect(fake.allocLogs(id, 'other', 'stdout')).rejects.toBeInstanceOf(NotFoundError);
    await expect(fake.allocLogs(id, 'other', 'stdout')).rejects.toThrow(/has no task "other" \(tasks: main\)/);
  });
});
