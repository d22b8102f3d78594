// UsageReader: `volume status` and `alloc status` read each live mount's
// usage (NodeGetVolumeStats) through this, so a plugin that hangs on the call
// never holds an operator's command for the whole CSI call limit (2 min by
// default). Each read answers within USAGE_ANSWER_WITHIN_MS with what it has:
// the usage, or "late" while the call goes on. A mount has at most one call
// in flight: a read while one runs joins it rather than stacking another on a
// plugin that is already not answering.
import type { Clock, Disposable } from '@csiplug/core';
import type { VolumeUsage } from '@csiplug/csimanager';

/** How long a status read waits for NodeGetVolumeStats before it answers "late". */
export const USAGE_ANSWER_WITHIN_MS = 5_000;

/** What a read had within its wait: the usage (undefined: the plugin reports none), or late. */
export type UsageReading = { kind: 'read'; usage: VolumeUsage | undefined } | { kind: 'late'; waitedMs: number };

export class UsageReader {
  /** The call in flight for each mount (by its record's key). */
  private readonly inFlight = new Map<string, Promise<VolumeUsage | undefined>>();

  constructor(
    private readonly clock: Clock,
    private readonly answerWithinMs: number = USAGE_ANSWER_WITHIN_MS,
  ) {}

  /** Calls in flight now (a hung plugin's stay until their own limit). */
  get pending(): number {
    return this.inFlight.size;
  }

  /** Reads `key`'s usage with `call`, or joins the call already in flight; rejects as the call does. */
  read(key: string, call: () => Promise<VolumeUsage | undefined>): Promise<UsageReading> {
    let flight = this.inFlight.get(key);
    if (!flight) {
      const started = call();
      flight = started;
      this.inFlight.set(key, started);
      const forget = () => {
        if (this.inFlight.get(key) === started) this.inFlight.delete(key);
      };
      started.then(forget, forget);
    }
    const answered = flight;
    return new Promise<UsageReading>((resolve, reject) => {
      let timer: Disposable | undefined = this.clock.setTimeout(() => {
        timer = undefined;
        resolve({ kind: 'late', waitedMs: this.answerWithinMs });
      }, this.answerWithinMs);
      answered.then(
        (usage) => {
          timer?.dispose();
          resolve({ kind: 'read', usage });
        },
        (err: unknown) => {
          timer?.dispose();
          reject(err);
        },
      );
    });
  }
}
