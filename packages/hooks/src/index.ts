// Public face of @csiplug/hooks.
export {};
