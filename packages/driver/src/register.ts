// registerExecDriver binds the exec driver as the agent's TaskDriver. It
// expects the core bindings (registerCore: IClock, ILogger) by the time the
// driver is first resolved. A deployment that binds its own ITaskDriver first
// keeps it.
import { bindDefault } from '@csiplug/core';
import type { DependencyContainer } from 'tsyringe';
import { ExecDriver, type ExecDriverOptions } from './exec-driver';
import { IExecDriverOptions, ITaskDriver } from './tokens';

export function registerExecDriver(container: DependencyContainer, options: ExecDriverOptions = {}): void {
  bindDefault(container, IExecDriverOptions, { useValue: Object.freeze({ ...options }) });
  bindDefault(container, ITaskDriver, { useClass: ExecDriver });
}
