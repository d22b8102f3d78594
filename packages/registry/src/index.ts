// Public face of @csiplug/registry.
export {};
