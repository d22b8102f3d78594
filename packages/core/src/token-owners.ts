// Which module binds each token, so that a token nobody bound is reported as
// the module to add, not as tsyringe's bare "Attempted to resolve
// unregistered dependency token". Each package declares, beside its module,
// the tokens that module binds (declareTokenOwner); ModuleHost turns
// tsyringe's refusal during a start into a MissingBindingError naming the
// token, the module that binds it and the module that needed it.
import type { DependencyContainer, InjectionToken } from 'tsyringe';
import { CsiplugError } from './errors';

/** A module as a reader adds it: its name, the export to list and the package it comes from. */
export interface ModuleRef {
  /** The module's `name` (as in logs and ModuleStartError). */
  readonly name: string;
  /** What a composition root lists, e.g. `stateModule`. */
  readonly exportName: string;
  readonly packageName: string;
}

const OWNERS = new Map<InjectionToken<unknown>, ModuleRef>();
const MODULES = new Map<string, ModuleRef>();

/** Declares that `module` binds `tokens` (called once per package, beside its module). */
export function declareTokenOwner(module: ModuleRef, tokens: readonly InjectionToken<unknown>[]): void {
  MODULES.set(module.name, module);
  for (const token of tokens) OWNERS.set(token, module);
}

/** The module that binds `token`, when one declared it. */
export function tokenOwner(token: InjectionToken<unknown>): ModuleRef | undefined {
  return OWNERS.get(token);
}

/** A token as people name it: a symbol's description, a class's name, a string as it is. */
export function tokenName(token: InjectionToken<unknown>): string {
  if (typeof token === 'symbol') return token.description ?? token.toString();
  if (typeof token === 'function') return token.name;
  return typeof token === 'string' ? token : String(token);
}

/** A module needed a token that no module in the list bound. */
export class MissingBindingError extends CsiplugError {
  constructor(
    readonly token: string,
    readonly owner: ModuleRef | undefined,
    readonly requester: string | undefined,
    options?: { cause?: unknown },
  ) {
    const before =
      requester === undefined
        ? 'to the module list'
        : `before ${MODULES.get(requester)?.exportName ?? `the ${requester} module`} in the module list`;
    super(
      'EBINDING_NOT_FOUND',
      owner
        ? `${token} is bound by the ${owner.name} module: add ${owner.exportName} (from ${owner.packageName}) ${before}`
        : `${token} is not bound, and no module says it binds it${requester === undefined ? '' : ` (the ${requester} module needs it)`}: bind it in the deployment's configure step, before the modules start`,
      options,
    );
  }
}

const UNREGISTERED = /unregistered dependency token: "?([^"\n]+)"?/;

/**
 * The MissingBindingError that `error` stands for when it (or an error in
 * its cause chain) is tsyringe's refusal to resolve a token `container` does
 * not bind; undefined for any other error. `requester` names the module
 * that was resolving.
 */
export function explainMissingBinding(container: DependencyContainer, error: unknown, requester?: string): MissingBindingError | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 10; e = e.cause, depth++) {
    if (e instanceof MissingBindingError) return e;
    const match = UNREGISTERED.exec(e.message);
    if (!match) continue;
    // tsyringe names the token as String(token) does; the innermost refusal is the last named in a nested message.
    const named = [...e.message.matchAll(new RegExp(UNREGISTERED.source, 'g'))].map((m) => m[1]!);
    const rendered = named[named.length - 1] ?? match[1]!;
    const token = [...OWNERS.keys()].find((t) => String(t) === rendered && !container.isRegistered(t, true));
    if (token !== undefined) return new MissingBindingError(tokenName(token), OWNERS.get(token), requester, { cause: error });
    return new MissingBindingError(rendered.replace(/^Symbol\((.*)\)$/, '$1'), undefined, requester, { cause: error });
  }
  return undefined;
}
