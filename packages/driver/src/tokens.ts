// Tokens of the task driver: the TaskDriver contract and the exec driver's
// options. Each token is a Symbol named like the type it stands for.
import type { TaskDriver } from './driver';
import type { ExecDriverOptions } from './exec-driver';

export type ITaskDriver = TaskDriver;
export const ITaskDriver: unique symbol = Symbol('ITaskDriver');

export type IExecDriverOptions = ExecDriverOptions;
export const IExecDriverOptions: unique symbol = Symbol('IExecDriverOptions');
