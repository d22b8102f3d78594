// DecodeFailure: a stored entry a list could not read back. Lists return
// these beside the entries they could read, so a caller decides what an
// unreadable record means (the agent logs it and leaves it in place); they
// are never dropped silently.

/** An entry that could not be decoded: its key and why. */
export interface DecodeFailure {
  key: string;
  error: string;
}
