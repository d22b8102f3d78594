// Public face of @csiplug/agent.
export * from './driver';
export * from './model';
export * from './spec';
export * from './service';
