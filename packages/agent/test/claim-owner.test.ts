// One owner for claims: every release the agent makes itself — a job purge,
// a volume detach, the claim sweep — goes through the IVolumeClaimer the
// volumes module binds (in a cluster, the claimer that releases here and
// then in etcd). A claimer bound by the deployment records each release and
// passes it on to the catalog; a path that released a claim by hand (the
// catalog directly) would leave the claim gone and the spy blind to it.
// In-process, on the memory state, with no plugin: claims are seeded in the
// state as a previous agent would have left them.
import { bind } from '@csiplug/core';
import { IVolumeStateStore, type VolumeStateStore } from '@csiplug/state';
import {
  IVolumeCatalog,
  IVolumeClaimer,
  type ClaimableVolume,
  type VolumeCatalogService,
  type VolumeClaimRequest,
  type VolumeClaimResult,
  type VolumeClaimer,
} from '@csiplug/volumes';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import type { DependencyContainer } from 'tsyringe';
import { Agent } from '../src/agent';
import { devConfig, parseJobspec } from '@csiplug/jobspec';

jest.setTimeout(60_000);

/** The catalog as the claimer, each release written down first. */
class ReleaseSpy implements VolumeClaimer {
  readonly releases: string[] = [];
  constructor(private readonly container: DependencyContainer) {}
  private get catalog(): VolumeClaimer {
    return this.container.resolve<VolumeCatalogService & VolumeClaimer>(IVolumeCatalog);
  }
  lookup(volumeId: string): Promise<ClaimableVolume> {
    return this.catalog.lookup(volumeId);
  }
  claim(request: VolumeClaimRequest, options?: { signal?: AbortSignal }): Promise<VolumeClaimResult> {
    return this.catalog.claim(request, options);
  }
  release(volumeId: string, allocId: string, options?: { signal?: AbortSignal }): Promise<void> {
    this.releases.push(`${volumeId}/${allocId}`);
    return this.catalog.release(volumeId, allocId, options);
  }
}

const SLEEPER = `
job "sleeper" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
`;

describe('every claim the agent releases goes through IVolumeClaimer', () => {
  let dataDir: string;
  let agent: Agent;
  let spy: ReleaseSpy;

  beforeEach(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-claim-owner-'));
    agent = await Agent.start(
      { ...devConfig(), dataDir, port: 0 },
      {
        configure(c) {
          spy = new ReleaseSpy(c);
          bind(c, IVolumeClaimer, { useValue: spy });
        },
      },
    );
  });
  afterEach(async () => {
    await agent.dispose({ stopTasks: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** A registered volume whose record holds a claim of each alloc, as an earlier agent left it. */
  const claimedVolume = async (id: string, allocIds: string[]) => {
    await agent.registerVolume({
      id,
      name: id,
      type: 'csi',
      pluginId: 'absent',
      externalId: `ext-${id}`,
      capabilities: [{ accessMode: 'multi-node-multi-writer', attachmentMode: 'file-system' }],
      parameters: {},
      secrets: {},
      context: {},
    });
    const state = agent.container.resolve<VolumeStateStore>(IVolumeStateStore);
    const record = state.getVolume<{ claims: unknown[] }>(id)!;
    state.putVolume(id, {
      ...record,
      claims: allocIds.map((allocId) => ({
        allocId,
        mode: 'write',
        accessMode: 'multi-node-multi-writer',
        attachmentMode: 'file-system',
        since: 1,
      })),
    });
    expect(agent.getVolume(id)?.claims.map((c) => c.allocId)).toEqual(allocIds);
  };

  it("the claim sweep releases a gone alloc's claim through the claimer", async () => {
    await claimedVolume('swept', ['gone-alloc']);
    const released = await agent.sweepClaims();
    expect(released).toEqual([{ volumeId: 'swept', allocId: 'gone-alloc' }]);
    expect(spy.releases).toEqual(['swept/gone-alloc']);
    expect(agent.getVolume('swept')?.claims).toEqual([]);
  });

  it('volume detach releases each claim of a gone alloc through the claimer', async () => {
    await claimedVolume('detached', ['gone-a', 'gone-b']);
    const result = await agent.detachVolume('detached', agent.config.nodeId);
    expect(result.released).toEqual(['gone-a', 'gone-b']);
    expect(spy.releases).toEqual(['detached/gone-a', 'detached/gone-b']);
    expect(agent.getVolume('detached')?.claims).toEqual([]);
  });

  it('a job purge releases the claims its allocs hold through the claimer', async () => {
    const { allocIds } = await agent.runJob(await parseJobspec(SLEEPER, 'sleeper.hcl'));
    expect(allocIds).toHaveLength(1);
    const allocId = allocIds[0]!;
    await claimedVolume('purged', [allocId, 'someone-else']);
    await agent.stopJob('sleeper', { purge: true });
    expect(spy.releases).toEqual([`purged/${allocId}`]);
    expect(agent.getVolume('purged')?.claims.map((c) => c.allocId)).toEqual(['someone-else']);
    expect(agent.getJob('sleeper')).toBeUndefined();
  });

  it('a job purge also releases a volume its alloc holds only by a publish cut short', async () => {
    const { allocIds } = await agent.runJob(await parseJobspec(SLEEPER, 'sleeper.hcl'));
    const allocId = allocIds[0]!;
    await claimedVolume('cut-short', []);
    // A ControllerPublish under way when the last agent died: no claim yet, the volume view shows nothing of it.
    const state = agent.container.resolve<VolumeStateStore>(IVolumeStateStore);
    state.putVolume('cut-short', { ...state.getVolume<object>('cut-short')!, publishing: { [allocId]: agent.config.nodeId } });
    await agent.stopJob('sleeper', { purge: true });
    expect(spy.releases).toEqual([`cut-short/${allocId}`]);
  });
});
