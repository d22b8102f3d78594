// SIGHUP reloads the config's reloadable parts — the log level, the ACL
// token, the timeouts — and says what changed and what waits for a restart;
// a file that cannot be read changes nothing; the agent never stops for it.
import * as fs from 'fs';
import { ApiClient } from '@csiplug/api';
import { AgentHarness, isAlive, pollUntil } from './support/agent-process';

jest.setTimeout(60_000);

describe('SIGHUP reloads the config', () => {
  let h: AgentHarness;
  beforeEach(() => {
    // No raw_exec block: the rewritten file below has none either, so it is no change that needs a restart.
    h = new AgentHarness('acl {\n  token = "first-token"\n}', { rawExec: false });
  });
  afterEach(async () => {
    await h.cleanup();
  });

  it('applies the new token, log level and timeouts at once, names what needs a restart, and survives a broken file', async () => {
    await h.start('first-token');
    const pid = h.proc!.pid!;
    const client = (token: string) => new ApiClient({ address: `http://127.0.0.1:${h.port}`, token });
    const write = (body: string) =>
      fs.writeFileSync(h.configFile, `data_dir = "${h.dataDir}"\nport = ${h.port}\nlog_json = true\n${body}\n`);
    const reloaded = async (text: string) => {
      const from = h.log.length;
      process.kill(pid, 'SIGHUP');
      return pollUntil(
        `"${text}" in the agent's log`,
        async () => (h.log.slice(from).includes(text) ? h.log.slice(from) : undefined),
        15_000,
      );
    };

    write('log_level = "info"\nacl {\n  token = "second-token"\n}\ntimeouts {\n  csi_call = "45s"\n}\nreconcile_orphans = true');
    // An info line: seen only because the level went from warn to info before it was written.
    const said = await reloaded('SIGHUP: config reloaded');
    expect(said).toContain('log_level warn → info');
    expect(said).toContain('acl token changed');
    expect(said).toContain('timeouts (csiCall)');
    expect(said).toMatch(/"settings":\["reconcileOrphans"\],"msg":"SIGHUP: these settings changed and take effect at the next start"/);
    expect(isAlive(pid)).toBe(true);
    await expect(client('first-token').health()).rejects.toThrow(/not valid/);
    expect((await client('second-token').health()).ok).toBe(true);

    // A file that cannot be read as a config changes nothing, and the agent runs on.
    fs.writeFileSync(h.configFile, 'this is { not a config');
    const refused = await reloaded('SIGHUP: the config file could not be read again');
    expect(refused).toContain('nothing changed');
    expect(isAlive(pid)).toBe(true);
    expect((await client('second-token').health()).ok).toBe(true);
    // Reloads do not pile up on the process: a burst of SIGHUPs leaves it alive.
    for (let i = 0; i < 5; i++) process.kill(pid, 'SIGHUP');
    await new Promise((r) => setTimeout(r, 500));
    expect(isAlive(pid)).toBe(true);
    h.api = client('second-token');
  });
});
