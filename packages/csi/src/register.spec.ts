import { container as root } from 'tsyringe';
import { NullLogger, registerCore } from '@csiplug/core';
import { registerCsi } from './register';
import { type CSIClientFactory, ICSIClientFactory } from './tokens';

describe('registerCsi', () => {
  it('binds a factory that makes one client per endpoint', () => {
    const c = root.createChildContainer();
    registerCore(c, { logger: new NullLogger() });
    registerCsi(c);
    const factory = c.resolve<CSIClientFactory>(ICSIClientFactory);
    expect(c.resolve(ICSIClientFactory)).toBe(factory);
    const client = factory.createClient('unix:///tmp/csiplug-none/csi.sock');
    expect(client.endpoint).toBe('unix:///tmp/csiplug-none/csi.sock');
    client.dispose();
  });

  it('leaves a factory bound by the deployment alone', () => {
    const c = root.createChildContainer();
    const mine: CSIClientFactory = { createClient: () => ({}) as never };
    c.register(ICSIClientFactory, { useValue: mine });
    registerCore(c, { logger: new NullLogger() });
    registerCsi(c);
    expect(c.resolve(ICSIClientFactory)).toBe(mine);
  });
});
