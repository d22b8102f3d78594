// Public face of @csiplug/csimanager.
export {};
