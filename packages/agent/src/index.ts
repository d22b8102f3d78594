// Public face of @csiplug/agent.
export * from './agent';
export * from './driver';
export * from './model';
export * from './service';
export * from './spec';
export * from './volumes';
