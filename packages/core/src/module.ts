// Modules with a lifecycle (credo-ts's Module is the model). Each package
// exports one module: `register` binds its defaults (lazily: nothing is made
// until first resolved), `start` brings up what must run before the node
// takes work, and `stop` tears down what the package made. A composition
// root (the agent) is an ordered list of modules, lowest layer first, and a
// ModuleHost runs it: registered forward, started forward, stopped in reverse.
//
// Errors, decided here once:
// - register: the module's own error is rethrown as is (a bad config is the
//   module's ValidationError; nothing has run yet, so nothing is undone).
// - start: the modules already started are stopped, newest first, then a
//   ModuleStartError naming the module is thrown, the original as its cause
//   (tsyringe's refusal of a token nobody bound becomes a MissingBindingError
//   naming the module that binds it: see ./token-owners).
//   A module whose own start throws cleans up what that start did.
// - stop: every stop runs, even after one throws; each failure is logged with
//   the module's name; then one failure is rethrown as a ModuleStopError, and
//   several as an AggregateError of them (as DisposableStore.clear does).
import type { DependencyContainer } from 'tsyringe';
import { CsiplugError, errorMessage } from './errors';
import { PinoLogger, type Logger } from './logger';
import { explainMissingBinding } from './token-owners';
import { ILogger } from './tokens';

export interface Module<Config = void> {
  /** Names the module in logs and errors; by convention the package's short name. */
  readonly name: string;
  /** Binds the module's defaults (bindDefault); must not resolve anything. */
  register(container: DependencyContainer, config: Config): void;
  /** Runs after every module is registered, forward in list order. */
  start?(container: DependencyContainer): void | Promise<void>;
  /** Runs in reverse list order; tears down what the module made. Idempotent. */
  stop?(container: DependencyContainer): void | Promise<void>;
}

/** A module with its config bound in: what a ModuleHost takes. */
export type ConfiguredModule = Module<void>;

/** `module` with `config` bound in, so modules of different configs share one list. */
export function withConfig<Config>(module: Module<Config>, config: Config): ConfiguredModule {
  return {
    name: module.name,
    register: (container) => module.register(container, config),
    ...(module.start ? { start: (container: DependencyContainer) => module.start!(container) } : {}),
    ...(module.stop ? { stop: (container: DependencyContainer) => module.stop!(container) } : {}),
  };
}

/** A module's start threw; the modules started before it were stopped again. */
export class ModuleStartError extends CsiplugError {
  constructor(
    readonly module: string,
    cause: unknown,
  ) {
    super('EMODULE_START', `module "${module}" failed to start: ${errorMessage(cause)}`, { cause });
  }
}

/** A module's stop threw; the other modules were stopped anyway. */
export class ModuleStopError extends CsiplugError {
  constructor(
    readonly module: string,
    cause: unknown,
  ) {
    super('EMODULE_STOP', `module "${module}" failed to stop: ${errorMessage(cause)}`, { cause });
  }
}

/** A list of modules set against a container was used out of order (start before register, twice…). */
export class ModuleHostStateError extends CsiplugError {
  constructor(message: string) {
    super('EMODULE_HOST_STATE', message);
  }
}

type HostPhase = 'new' | 'registered' | 'starting' | 'started' | 'stopped';
const PHASE_WORDS: Record<HostPhase, string> = {
  new: 'not registered yet',
  registered: 'registered but not started',
  starting: 'starting',
  started: 'started',
  stopped: 'stopped',
};

/**
 * Runs an ordered list of modules against one container: `register()`, then
 * (after whatever the owner does between the two) `start()`, then `stop()`.
 * Each step runs once; `stop()` is idempotent and returns the same promise.
 */
export class ModuleHost {
  private readonly modules: readonly ConfiguredModule[];
  private phase: HostPhase = 'new';
  /** Modules whose start has run (or that have none), in start order. */
  private readonly started: ConfiguredModule[] = [];
  private stopping: Promise<void> | undefined;
  private logger: Logger | undefined;

  /**
   * `logger` names failed starts and stops; by default the container's
   * ILogger (bound by the time anything starts: core is the first module),
   * or pino's default where the container has none.
   */
  constructor(
    private readonly container: DependencyContainer,
    modules: readonly ConfiguredModule[],
    logger?: Logger,
  ) {
    this.logger = logger;
    const seen = new Set<string>();
    for (const m of modules) {
      if (seen.has(m.name)) throw new ModuleHostStateError(`module "${m.name}" is in the list twice; each module is listed once`);
      seen.add(m.name);
    }
    this.modules = [...modules];
  }

  /** The modules' names, in list order. */
  get names(): string[] {
    return this.modules.map((m) => m.name);
  }

  /** Registers every module, in list order. A registration error is the module's own, rethrown as is. */
  register(): void {
    this.expect('new', 'register');
    this.phase = 'registered';
    for (const m of this.modules) m.register(this.container);
  }

  /**
   * Starts every module, in list order. If one throws, the modules started
   * before it are stopped (newest first, every stop runs) and a
   * ModuleStartError naming it is thrown.
   */
  async start(): Promise<void> {
    this.expect('registered', 'start');
    this.phase = 'starting';
    for (const m of this.modules) {
      try {
        await m.start?.(this.container);
      } catch (thrown) {
        const err = explainMissingBinding(this.container, thrown, m.name) ?? thrown;
        this.log.error('a module failed to start; stopping the modules started before it', { module: m.name, error: err });
        this.phase = 'stopped';
        this.stopping = this.stopStarted().catch(() => {
          // Each failure is logged by stopStarted, naming its module; the start's own error is the one to throw.
        });
        await this.stopping;
        throw new ModuleStartError(m.name, err);
      }
      this.started.push(m);
    }
    this.phase = 'started';
  }

  /**
   * Stops the started modules, newest first. Every stop runs; each failure
   * is logged with its module's name, then rethrown (one: ModuleStopError;
   * several: AggregateError of them). Idempotent; before start, a no-op.
   */
  stop(): Promise<void> {
    if (this.phase === 'starting')
      return Promise.reject(
        new ModuleHostStateError(
          'the agent was asked to stop while its modules are still starting; wait until they have started (or failed to), then stop it',
        ),
      );
    this.phase = 'stopped';
    this.stopping ??= this.stopStarted();
    return this.stopping;
  }

  private async stopStarted(): Promise<void> {
    const errors: ModuleStopError[] = [];
    while (this.started.length) {
      const m = this.started.pop()!;
      try {
        await m.stop?.(this.container);
      } catch (err) {
        this.log.error('a module failed to stop; stopping the others anyway', { module: m.name, error: err });
        errors.push(new ModuleStopError(m.name, err));
      }
    }
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1)
      throw new AggregateError(errors, `${errors.length} modules failed to stop: ${errors.map((e) => e.module).join(', ')}`);
  }

  private get log(): Logger {
    this.logger ??= this.container.isRegistered(ILogger, true)
      ? this.container.resolve<Logger>(ILogger).child({ component: 'modules' })
      : new PinoLogger();
    return this.logger;
  }

  private expect(phase: HostPhase, step: string): void {
    if (this.phase !== phase)
      throw new ModuleHostStateError(
        `cannot ${step} the modules: they are ${PHASE_WORDS[this.phase]}; modules are registered, started and stopped in that order, each once`,
      );
  }
}
