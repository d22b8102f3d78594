// IHooksConfig: where the hooks keep their files (the agent's data dir). Its
// own file, so a hook can read it without importing tokens.ts, which names
// the hooks' factories.
export interface HooksConfig {
  readonly dataDir: string;
}
export type IHooksConfig = HooksConfig;
export const IHooksConfig: unique symbol = Symbol('IHooksConfig');
