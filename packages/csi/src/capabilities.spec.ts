import {
  blockCapability,
  checkConfirmedCapabilities,
  controllerCapabilitiesFrom,
  mountCapability,
  nodeCapabilitiesFrom,
  pluginCapabilitiesFrom,
  volumeCapabilityProblems,
} from './capabilities';

describe('capability flags', () => {
  it('reads plugin capabilities and ignores unknown ones', () => {
    const caps = pluginCapabilitiesFrom({
      capabilities: [
        { service: { type: 'CONTROLLER_SERVICE' }, type: 'service' },
        { service: { type: 'VOLUME_ACCESSIBILITY_CONSTRAINTS' }, type: 'service' },
        { service: { type: 99 as never }, type: 'service' },
        { volumeExpansion: { type: 'ONLINE' }, type: 'volumeExpansion' },
      ],
    });
    expect(caps).toEqual({
      controllerService: true,
      accessibilityConstraints: true,
      groupControllerService: false,
      onlineExpansion: true,
      offlineExpansion: false,
    });
    expect(pluginCapabilitiesFrom(undefined).controllerService).toBe(false);
  });

  it('reads node capabilities', () => {
    const caps = nodeCapabilitiesFrom({
      capabilities: ['STAGE_UNSTAGE_VOLUME', 'GET_VOLUME_STATS', 'EXPAND_VOLUME', 'SINGLE_NODE_MULTI_WRITER'].map((t) => ({
        rpc: { type: t as never },
        type: 'rpc' as const,
      })),
    });
    expect(caps).toEqual({
      stageUnstageVolume: true,
      getVolumeStats: true,
      expandVolume: true,
      volumeCondition: false,
      singleNodeMultiWriter: true,
      volumeMountGroup: false,
    });
  });

  it('reads controller capabilities', () => {
    const caps = controllerCapabilitiesFrom({
      capabilities: ['CREATE_DELETE_VOLUME', 'PUBLISH_UNPUBLISH_VOLUME', 'LIST_VOLUMES', 'GET_CAPACITY', 'MODIFY_VOLUME'].map((t) => ({
        rpc: { type: t as never },
        type: 'rpc' as const,
      })),
    });
    expect(caps.createDeleteVolume && caps.publishUnpublishVolume && caps.listVolumes && caps.getCapacity && caps.modifyVolume).toBe(true);
    expect(caps.createDeleteSnapshot || caps.expandVolume).toBe(false);
  });
});

describe('volume capability builders and checks', () => {
  it('builds mount and block capabilities', () => {
    expect(mountCapability('SINGLE_NODE_WRITER', { fsType: 'ext4', mountFlags: ['noatime'] })).toEqual({
      mount: { fsType: 'ext4', mountFlags: ['noatime'], volumeMountGroup: '' },
      accessMode: { mode: 'SINGLE_NODE_WRITER' },
    });
    expect(blockCapability('MULTI_NODE_READER_ONLY')).toEqual({ block: {}, accessMode: { mode: 'MULTI_NODE_READER_ONLY' } });
    expect(volumeCapabilityProblems(mountCapability('SINGLE_NODE_WRITER'))).toEqual([]);
    expect(volumeCapabilityProblems({ mount: {}, block: {}, accessMode: { mode: 'SINGLE_NODE_WRITER' } })[0]).toMatch(
      /exactly one access type/,
    );
    expect(volumeCapabilityProblems({ mount: {}, accessMode: { mode: 'UNKNOWN' } })[0]).toMatch(/access_mode is required/);
  });

  const asOutput = (c: ReturnType<typeof mountCapability>) => ({ ...c, accessMode: c.accessMode ?? null }) as never;

  it('accepts a confirmation that echoes what was asked', () => {
    const want = [mountCapability('SINGLE_NODE_WRITER', { fsType: 'xfs', mountFlags: ['ro'] })];
    const res = {
      confirmed: { volumeContext: {}, volumeCapabilities: want.map(asOutput), parameters: {}, mutableParameters: {} },
      message: '',
    };
    expect(checkConfirmedCapabilities(want, res)).toEqual({ ok: true });
  });

  it('rejects a missing confirmation and says why', () => {
    const r = checkConfirmedCapabilities([mountCapability('SINGLE_NODE_WRITER')], { confirmed: null, message: 'block only' });
    expect(r).toEqual({ ok: false, reason: expect.stringContaining('block only') });
  });

  it.each([
    ['a different access mode', mountCapability('SINGLE_NODE_READER_ONLY', { fsType: 'xfs', mountFlags: ['ro'] })],
    ['a different fs type', mountCapability('SINGLE_NODE_WRITER', { fsType: 'ext4', mountFlags: ['ro'] })],
    ['a dropped mount flag', mountCapability('SINGLE_NODE_WRITER', { fsType: 'xfs' })],
    ['a different access type', blockCapability('SINGLE_NODE_WRITER')],
  ])('rejects a confirmation with %s', (_why, confirmed) => {
    const want = [mountCapability('SINGLE_NODE_WRITER', { fsType: 'xfs', mountFlags: ['ro'] })];
    const res = {
      confirmed: { volumeContext: {}, volumeCapabilities: [asOutput(confirmed)], parameters: {}, mutableParameters: {} },
      message: '',
    };
    expect(checkConfirmedCapabilities(want, res).ok).toBe(false);
  });
});
