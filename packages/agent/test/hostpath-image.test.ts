// The hostpath plugin from its OCI image through a real agent, as a Nomad
// user runs a plugin shipped as an image: the image built and pushed by the
// user's command (`image:hostpath`'s program, packages/hostpath-plugin/image,
// with --push to a real registry over TLS with basic auth), the plugin job
// on `driver = "docker"` with `privileged = true` and `auth {}`, monolith.
// The plugin stages and publishes inside its container; with the
// bidirectional staging/publish base those mounts are the host's, so a
// workload writes into the volume and the file lands in the plugin's store.
// A stop with purge leaves no container and no mount; the registry's CA, put where
// Docker's trust reads it (/etc/docker/certs.d/<host:port>), is removed
// (support/image-registry.ts).
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { containerId } from '@csiplug/driver';
import { jobToNomadJson, parseJobspec, parseVolumeSpec, volumeSpecToDocument } from '@csiplug/jobspec';
import { workloadJobHcl } from '../src/commands/specs';
import { AgentHarness, containersUnder, mountsUnder, pollUntil, volumeSpec } from './support/agent-process';
import { TrustedRegistry } from './support/image-registry';

jest.setTimeout(300_000);

const pluginJob = (image: string, authHcl: string): string => `
job "hostpath-image-plugin" {
  group "plugin" {
    task "plugin" {
      driver = "docker"
      config {
        image      = "${image}"
        privileged = true
        args = ["--endpoint", "\${CSI_ENDPOINT}", "--node-id", "\${CSIPLUG_NODE_ID}",
                "--state-dir", "\${CSIPLUG_PLUGIN_DATA_DIR}/state", "--mode", "monolith", "--log-level", "warn"]
        ${authHcl}
      }
      csi_plugin {
        id   = "hostpath"
        type = "monolith"
      }
      kill_signal = "SIGINT"
    }
  }
}`;

let registry: TrustedRegistry;
let image: string;

beforeAll(async () => {
  registry = await TrustedRegistry.start();
  image = registry.pushHostpathImage();
});

afterAll(async () => {
  await registry?.stop();
});

describe('the hostpath plugin from its image (driver docker) through the agent', () => {
  let h: AgentHarness;

  beforeEach(() => {
    h = new AgentHarness(`plugin "docker" {\n  config {\n    allow_privileged = true\n  }\n}\n`);
  });
  afterEach(async () => {
    if (!h) return;
    const { leftMounts, leftContainers } = await h.cleanup();
    expect(leftMounts).toEqual([]);
    expect(leftContainers).toEqual([]);
  });

  it('pulls it, serves as a monolith plugin, and its mounts (bidirectional) carry a workload write into its store', async () => {
    await h.start();
    await h.api.runJob(jobToNomadJson(await parseJobspec(pluginJob(image, registry.authHcl), 'plugin.hcl')));
    const plugin = await pollUntil(
      'the plugin from its image healthy',
      async () => {
        const p = await h.api.getPlugin('hostpath').catch(() => undefined);
        return p && p.nodesHealthy === 1 && p.controllersHealthy === 1 ? p : undefined;
      },
      120_000,
    ).catch(async (err: unknown) => {
      const allocs = await h.api.listAllocs().catch(() => []);
      throw new Error(`${String(err)}\n${JSON.stringify(allocs.map((a) => a.tasks)).slice(-4000)}\n${h.log.slice(-3000)}`);
    });
    const pluginAlloc = plugin.allocs[0]!;
    expect(containersUnder(h.root)).toEqual([containerId(pluginAlloc, 'plugin')]);
    const events = (await h.api.getAlloc(pluginAlloc)).tasks.plugin!.events.map((e) => e.type);
    expect(events).toContain('Pulled');

    await h.api.createVolume(volumeSpecToDocument(await parseVolumeSpec(volumeSpec('vol-img'), 'v.hcl')));
    const script = 'echo "${CSIPLUG_ALLOC_ID}" > "$CSIPLUG_VOLUME_DATA/owner.txt"; exec sleep 3600';
    const { allocIds } = await h.api.runJob(jobToNomadJson(await parseJobspec(workloadJobHcl('writer', 'vol-img', script), 'w.hcl')));
    const id = allocIds[0]!;
    const alloc = await pollUntil(
      'the workload running with its file written',
      async () => {
        const a = await h.api.getAlloc(id);
        if (a.clientStatus === 'failed') throw new Error(`the workload failed: ${JSON.stringify(a.tasks)}`);
        return a.clientStatus === 'running' && a.volumes.data && fs.existsSync(path.join(a.volumes.data.hostPath, 'owner.txt'))
          ? a
          : undefined;
      },
      60_000,
    );
    const hostPath = alloc.volumes.data!.hostPath;
    // The plugin published it from inside its container, with the image's mount(8): a mount on the host.
    expect(mountsUnder(hostPath)).toEqual([hostPath]);
    const store = path.join(h.dataDir, 'plugin-data', 'hostpath', 'state');
    const found = execFileSync('find', [store, '-name', 'owner.txt']).toString().trim().split('\n').filter(Boolean);
    expect(found).toHaveLength(1);
    expect(fs.readFileSync(found[0]!, 'utf8').trim()).toBe(id);

    await h.api.stopJob('writer', { purge: true });
    await pollUntil('the volume unpublished', async () => (mountsUnder(hostPath).length === 0 ? true : undefined), 60_000);
    // A stopped image task keeps its root until its alloc goes (as Docker keeps a stopped container's): purged, nothing stays.
    await h.api.stopJob('hostpath-image-plugin', { purge: true });
    await pollUntil(
      'the plugin container and its image root gone',
      async () => (containersUnder(h.root).length === 0 && mountsUnder(h.root).length === 0 ? true : undefined),
      60_000,
    );
  });
});
