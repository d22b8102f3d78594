// Public face of @csiplug/hostpath-plugin.
export {};
