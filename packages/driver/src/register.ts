// registerExecDriver binds the exec driver as the agent's TaskDriver. It
// expects the core bindings (registerCore: IClock, ILogger) by the time the
// driver is first resolved. A deployment that binds its own ITaskDriver first
// keeps it. driverModule is the same as a Module; its stop disposes the
// driver (waits in flight end; the tasks keep running, for the next agent).
import { bindDefault, declareTokenOwner, type Module } from '@csiplug/core';
import type { DependencyContainer } from 'tsyringe';
import type { TaskDriver } from './driver';
import { ExecDriver } from './exec-driver';
import { IExecDriverOptions, ITaskDriver, type ExecDriverOptions } from './tokens';

export function registerExecDriver(container: DependencyContainer, options: ExecDriverOptions = {}): void {
  bindDefault(container, IExecDriverOptions, { useValue: Object.freeze({ ...options }) });
  bindDefault(container, ITaskDriver, { useClass: ExecDriver });
}

/** The exec driver as a module: registration, and a stop that disposes whatever ITaskDriver is. */
export const driverModule: Module<ExecDriverOptions> = {
  name: 'driver',
  register: (container, config) => registerExecDriver(container, config),
  stop: (container) => container.resolve<TaskDriver>(ITaskDriver).dispose(),
};

declareTokenOwner({ name: 'driver', exportName: 'driverModule', packageName: '@csiplug/driver' }, [IExecDriverOptions, ITaskDriver]);
