// A deployment swaps an implementation by binding its own to a token before
// the agent starts; the agent then uses it. Checked in-process and through
// the runnable example in examples/embed-agent.js.
import {
  DefaultTimeoutPolicy,
  DuplicateBindingError,
  ILogger,
  ITimeoutPolicy,
  MemoryLogger,
  ValidationError,
  bind,
  type TimeoutPolicy,
} from '@csiplug/core';
import { ICSIManager } from '@csiplug/csimanager';
import { IVolumeCatalog, IVolumeClaimer, IVolumeSpecValidator, type VolumeSpec } from '@csiplug/volumes';
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { promisify } from 'util';
import { Agent } from '../src/agent';
import { checkVolumeSpec, devConfig } from '@csiplug/jobspec';

describe('composition by tokens', () => {
  let dataDir: string;
  beforeEach(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'csiplug-compose-'));
  });
  afterEach(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  it('uses what a deployment bound first, and the defaults for the rest', async () => {
    class LongRestore extends DefaultTimeoutPolicy {
      override pluginWait(phase: 'prerun' | 'restore' | 'postrun'): number {
        return phase === 'restore' ? 900_000 : super.pluginWait(phase);
      }
    }
    const logger = new MemoryLogger();
    const agent = await Agent.start(
      { ...devConfig(), dataDir, port: 0 },
      {
        configure(c) {
          bind(c, ITimeoutPolicy, { useValue: new LongRestore() });
          bind(c, ILogger, { useValue: logger });
        },
      },
    );
    try {
      expect(agent.container.resolve<TimeoutPolicy>(ITimeoutPolicy).pluginWait('restore')).toBe(900_000);
      expect(logger.find('agent started')).toHaveLength(1);
      // the catalog is both the volume claimer and the catalog
      expect(agent.container.resolve(IVolumeClaimer)).toBe(agent.container.resolve(IVolumeCatalog));
      // …and checks specs with the agent's reader: a spec no file could have held is refused, nothing stored
      expect(agent.container.resolve(IVolumeSpecValidator)).toBe(checkVolumeSpec);
      const bad = {
        id: 'v',
        name: 'v',
        type: 'csi',
        pluginId: 'hp',
        externalId: 'x',
        capabilities: [],
        parameters: {},
        secrets: {},
        context: {},
      } satisfies VolumeSpec;
      await expect(agent.registerVolume(bad)).rejects.toBeInstanceOf(ValidationError);
      await expect(agent.registerVolume(bad)).rejects.toThrow(/capability is required/);
      expect(agent.listVolumes()).toEqual([]);
      expect(agent.container.resolve(ICSIManager)).toBeDefined();
    } finally {
      await agent.dispose({ stopTasks: true });
    }
  });

  it('binding a token twice is an error, not a silent override', async () => {
    await expect(
      Agent.start(
        { ...devConfig(), dataDir, port: 0 },
        {
          configure(c) {
            bind(c, ITimeoutPolicy, { useValue: new DefaultTimeoutPolicy() });
            bind(c, ITimeoutPolicy, { useValue: new DefaultTimeoutPolicy() });
          },
        },
      ),
    ).rejects.toBeInstanceOf(DuplicateBindingError);
  });

  it('the embedding example runs', async () => {
    const example = path.resolve(__dirname, '..', '..', '..', 'examples', 'embed-agent.js');
    const { stdout } = await promisify(execFile)(process.execPath, [example], { timeout: 60_000 });
    expect(stdout).toMatch(/restore wait: 15 min \(custom policy: true\)/);
    expect(stdout).toMatch(/custom logger/);
  });
});
