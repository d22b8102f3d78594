// Binding helpers over tsyringe. A token is bound once: `bind` twice is an
// error, not a silent override. Registration functions use `bindDefault`,
// which leaves a token alone when a deployment bound its own first.
import { type ClassProvider, type DependencyContainer, type InjectionToken, Lifecycle } from 'tsyringe';
import { CsiplugError } from './errors';

// tsyringe's own type for a class it builds (or a delay() of one): a constructor taking whatever it injects.
type Ctor<T> = ClassProvider<T>['useClass'];

export type Provider<T> = { useValue: T } | { useClass: Ctor<T> } | { useFactory: (c: DependencyContainer) => T };

export class DuplicateBindingError extends CsiplugError {
  constructor(token: InjectionToken<unknown>) {
    super(
      'EDUPLICATE_BINDING',
      `token ${String(token)} is bound already; bind each token once (a deployment binds its own before the registration functions run)`,
    );
  }
}

function apply<T>(container: DependencyContainer, token: InjectionToken<T>, provider: Provider<T>): void {
  if ('useValue' in provider) {
    container.register(token, { useValue: provider.useValue });
  } else if ('useClass' in provider) {
    container.register(token, { useClass: provider.useClass }, { lifecycle: Lifecycle.ContainerScoped });
  } else {
    // Factories run once per container: the result is cached like a singleton.
    let made = false;
    let value: T;
    container.register(token, {
      useFactory: (c) => {
        if (!made) {
          value = provider.useFactory(c);
          made = true;
        }
        return value;
      },
    });
  }
}

/** Binds `token`; throws DuplicateBindingError if it is bound already. */
export function bind<T>(container: DependencyContainer, token: InjectionToken<T>, provider: Provider<T>): void {
  if (container.isRegistered(token, false)) throw new DuplicateBindingError(token);
  apply(container, token, provider);
}

/** Binds `token` unless something is bound to it already; returns whether it bound. */
export function bindDefault<T>(container: DependencyContainer, token: InjectionToken<T>, provider: Provider<T>): boolean {
  if (container.isRegistered(token, false)) return false;
  apply(container, token, provider);
  return true;
}
