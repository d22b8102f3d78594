// End to end, with real processes, sockets, SQLite and bind mounts: a node
// plugin that reports every volume abnormal while its mounts are healthy
// (the hostpath plugin's --abnormal-rpc fault switch, as csi-driver-host-path
// does for any mount outside kubelet's pod directories) must not have a live
// mount taken down under its workload. A workload appends to a file on the
// volume every few ms while the agent is killed (kill -9) and started 3
// times; every write it saw succeed is in the volume's file, none failed,
// and the plugin's word was reported (task event, `volume status`).
import * as fs from 'fs';
import * as path from 'path';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { hostpathPluginJobHcl, workloadJobHcl } from '../src/commands/specs';
import { AgentHarness, mountsUnder, pollUntil, volumeSpec } from './support/agent-process';

jest.setTimeout(300_000);

const RESTARTS = 3;
/** Task events of a live mount check that ends it: whatever the check found, it is over. */
const CHECK_ENDS = [
  'Volume checked',
  'Volume reported abnormal',
  'Volume remounted',
  'Volume remount failed',
  'Volume remount refused, in use',
];

/** The hostpath plugin's --state-dir: its CSIPLUG_PLUGIN_DATA_DIR (plugin-data/<plugin id>) + /state. */
function pluginStateDir(dataDir: string): string {
  const dir = path.join(dataDir, 'plugin-data', 'hostpath', 'state');
  if (!fs.existsSync(path.join(dir, 'volumes')))
    throw new Error(`no hostpath plugin state at ${dir}: ${fs.readdirSync(path.join(dataDir, 'plugin-data')).join(', ')}`);
  return dir;
}

describe('a plugin that reports a healthy mount abnormal', () => {
  let h: AgentHarness;

  beforeEach(() => {
    h = new AgentHarness();
  });

  afterEach(async () => {
    const { leftMounts } = await h.cleanup();
    expect(leftMounts).toEqual([]);
  });

  it(`${RESTARTS} agent restarts under a workload appending every 5 ms: 0 writes failed, every write reported done is on the volume, the condition reported`, async () => {
    await h.start();
    await h.api.runJob(
      jobToNomadJson(
        await parseJobspec(
          hostpathPluginJobHcl({ restartDelay: '100ms', extraArgs: ['--abnormal-rpc', 'NodeGetVolumeStats'] }),
          'plugin.hcl',
        ),
      ),
    );
    await pollUntil('plugin hostpath healthy', async () => {
      const p = await h.api.getPlugin('hostpath').catch(() => undefined);
      return p && p.nodesHealthy === 1 ? p : undefined;
    });
    await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('vol-0'), 'vol-0.hcl')));
    // What the workload saw of each append, kept outside the volume.
    const seen = path.join(h.root, 'appends-seen.log');
    const script = `i=0; while :; do i=$((i+1)); if echo "$i" >> "$CSIPLUG_VOLUME_DATA/appends.txt"; then echo "ok $i" >> ${JSON.stringify(seen)}; else echo "fail $i" >> ${JSON.stringify(seen)}; fi; sleep 0.005; done`;
    const { allocIds } = await h.api.runJob(
      jobToNomadJson(await parseJobspec(workloadJobHcl('appender', 'vol-0', script), 'appender.hcl')),
    );
    const allocId = allocIds[0]!;
    const lines = () => (fs.existsSync(seen) ? fs.readFileSync(seen, 'utf8').split('\n').filter(Boolean) : []);
    /** Waits for the workload to report `n` more appends than now. */
    const moreWrites = (n: number) => {
      const from = lines().length;
      return pollUntil(`${n} more appends`, async () => (lines().length >= from + n ? true : undefined));
    };
    const alloc = await pollUntil('the workload running', async () => {
      const a = await h.api.getAlloc(allocId);
      if (a.clientStatus === 'failed') throw new Error(`the workload failed: ${JSON.stringify(a)}`);
      return a.clientStatus === 'running' && a.volumes.data ? a : undefined;
    });
    const target = alloc.volumes.data!.hostPath;
    await moreWrites(100);
    const checkEnds = async () => (await h.api.getAlloc(allocId)).tasks.writer!.events.filter((e) => CHECK_ENDS.includes(e.type)).length;

    for (let round = 1; round <= RESTARTS; round++) {
      const before = await checkEnds();
      await h.kill('SIGKILL');
      await h.start();
      // The restored mount is checked once the plugin serves; whatever the check does (a remount too) is over when it ends.
      await pollUntil(`round ${round}: the live mount checked after the restart`, async () =>
        (await checkEnds()) > before ? true : undefined,
      );
      await moreWrites(100);
    }

    // Every append the workload saw succeed is in the volume's file: read in the plugin's backing directory of the
    // volume, not through the target (a write that landed under a lost mount point shows there, and is not on the volume).
    const seenNow = lines();
    const backing = path.join(pluginStateDir(h.dataDir), 'volumes', (await h.api.getVolume('vol-0')).externalId, 'appends.txt');
    const onVolume = new Set(fs.readFileSync(backing, 'utf8').split('\n').filter(Boolean));
    const failed = seenNow.filter((l) => l.startsWith('fail '));
    const lost = seenNow.filter((l) => l.startsWith('ok ') && !onVolume.has(l.slice(3)));
    expect({ failed, lost }).toEqual({ failed: [], lost: [] });
    expect(seenNow.length).toBeGreaterThan(300);
    expect(mountsUnder(target)).toEqual([target]);

    // The plugin's word was reported: a task event each check, and `volume status`.
    const events = (await h.api.getAlloc(allocId)).tasks.writer!.events;
    expect(events.filter((e) => e.type === 'Volume reported abnormal')).toHaveLength(RESTARTS);
    expect(events.filter((e) => e.type === 'Volume reported abnormal')[0]!.message).toMatch(
      /answers, but plugin hostpath reports the volume abnormal .*fault switch.*; kept as it is/,
    );
    expect(events.filter((e) => /^Volume (stale|remounted|remount)/.test(e.type))).toEqual([]);
    const mount = (await h.api.getVolume('vol-0')).mounts?.find((m) => m.allocId === allocId);
    expect(mount?.check).toMatchObject({ state: 'abnormal', message: expect.stringMatching(/reports the volume abnormal/) });
  });
});
