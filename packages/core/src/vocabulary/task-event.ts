// A task event (Nomad's TaskEvent): what happened to a task, kept in its
// state and shown by `alloc status`. Hooks and runners add them; the job
// model stores them.

/** A task event, as Nomad shows them in `alloc status`. */
export interface TaskEvent {
  type: string;
  message: string;
  /** ms since the epoch. */
  time: number;
  /** The event means the task failed (a setup failure, not a health report). */
  failed?: boolean;
  details?: Record<string, string>;
}
