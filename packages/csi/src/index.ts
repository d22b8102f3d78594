// Public face of @csiplug/csi.
export {};
