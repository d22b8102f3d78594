// CallScope: one API call's deadline and its caller's signal, as the one
// AbortSignal the request is made with (ApiTransport).
import type { Clock, Disposable } from '@csiplug/core';

/**
 * A call's deadline and the caller's signal, as the one AbortSignal the
 * request is made with. The deadline runs on the injected clock.
 */
export class CallScope implements Disposable {
  private readonly controller = new AbortController();
  private timer: Disposable | undefined;
  private readonly detach: (() => void) | undefined;
  timedOut = false;

  constructor(
    clock: Clock,
    timeoutMs: number,
    private readonly callerSignal?: AbortSignal,
  ) {
    if (timeoutMs > 0) {
      this.timer = clock.setTimeout(() => {
        this.timedOut = true;
        this.controller.abort();
      }, timeoutMs);
    }
    if (callerSignal) {
      const onAbort = () => this.controller.abort();
      if (callerSignal.aborted) onAbort();
      callerSignal.addEventListener('abort', onAbort, { once: true });
      this.detach = () => callerSignal.removeEventListener('abort', onAbort);
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.callerSignal?.aborted === true;
  }

  /** The answer has started: from here on only the caller's signal ends the call. */
  stopTimer(): void {
    this.timer?.dispose();
    this.timer = undefined;
  }

  dispose(): void {
    this.stopTimer();
    this.detach?.();
  }
}
