// The task driver's public face within the agent (the executor script is
// not exported: it is a program, run by path).
export * from './driver';
export * from './errors';
export * from './exec-driver';
export * from './proc';
export * from './register';
export * from './restart-tracker';
export * from './tokens';
