// Public face of @csiplug/agent.
export {};
