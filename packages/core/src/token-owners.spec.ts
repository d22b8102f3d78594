// A module list missing the module that binds a token: the start fails with a
// MissingBindingError naming the token, the module that binds it and where
// to add it — not tsyringe's "Attempted to resolve unregistered dependency
// token". (packages/agent/src/agent-modules.spec.ts does the same over the
// real modules.)
import 'reflect-metadata';
import { container as rootContainer, inject, injectable, type DependencyContainer } from 'tsyringe';
import { bindDefault } from './di';
import { MemoryLogger } from './logger';
import { ModuleHost, ModuleStartError, type ConfiguredModule } from './module';
import { declareTokenOwner, explainMissingBinding, MissingBindingError, tokenOwner } from './token-owners';
import { ILogger } from './tokens';

interface Store {
  get(): string;
}
const IStoreForTest: unique symbol = Symbol('IStoreForTest');
const IServiceForTest: unique symbol = Symbol('IServiceForTest');
const IUndeclaredForTest: unique symbol = Symbol('IUndeclaredForTest');

@injectable()
class Service {
  constructor(@inject(IStoreForTest) readonly store: Store) {}
}

const storeModule: ConfiguredModule = {
  name: 'teststore',
  register: (c) => {
    bindDefault(c, IStoreForTest, { useValue: { get: () => 'x' } });
  },
};
const serviceModule: ConfiguredModule = {
  name: 'testservice',
  register: (c) => {
    bindDefault(c, IServiceForTest, { useClass: Service });
  },
  start: (c) => {
    c.resolve(IServiceForTest);
  },
};
declareTokenOwner({ name: 'teststore', exportName: 'testStoreModule', packageName: '@csiplug/teststore' }, [IStoreForTest]);
declareTokenOwner({ name: 'testservice', exportName: 'testServiceModule', packageName: '@csiplug/testservice' }, [IServiceForTest]);

describe('a missing DI registration', () => {
  let container: DependencyContainer;
  beforeEach(() => {
    container = rootContainer.createChildContainer();
    container.register(ILogger, { useValue: new MemoryLogger() });
  });

  it('names the module that binds the token and where to add it, when that module is left out', async () => {
    const host = new ModuleHost(container, [serviceModule]);
    host.register();
    const err = await host.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ModuleStartError);
    const cause = (err as ModuleStartError).cause;
    expect(cause).toBeInstanceOf(MissingBindingError);
    expect((cause as MissingBindingError).message).toBe(
      'IStoreForTest is bound by the teststore module: add testStoreModule (from @csiplug/teststore) before testServiceModule in the module list',
    );
    expect((cause as MissingBindingError).code).toBe('EBINDING_NOT_FOUND');
    expect((err as Error).message).not.toContain('Attempted to resolve unregistered dependency token');
    // tsyringe's own words stay reachable, as the cause.
    expect(String(((cause as MissingBindingError).cause as Error).message)).toContain('unregistered dependency token');
  });

  it('starts when the module is there, in front', async () => {
    const host = new ModuleHost(container, [storeModule, serviceModule]);
    host.register();
    await expect(host.start()).resolves.toBeUndefined();
    await host.stop();
  });

  it('says when no module declares the token, and leaves other errors alone', () => {
    let raw: unknown;
    try {
      container.resolve(IUndeclaredForTest);
    } catch (e) {
      raw = e;
    }
    expect(explainMissingBinding(container, raw, 'testservice')?.message).toBe(
      "IUndeclaredForTest is not bound, and no module says it binds it (the testservice module needs it): bind it in the deployment's configure step, before the modules start",
    );
    expect(explainMissingBinding(container, new Error('something else'))).toBeUndefined();
    expect(tokenOwner(IStoreForTest)?.exportName).toBe('testStoreModule');
  });
});
