// Public face of @csiplug/state.
export {};
