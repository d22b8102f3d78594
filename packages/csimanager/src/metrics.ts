// What the CSI manager records (through @csiplug/core's Metrics): how long
// callers waited for a plugin, and how long each node step of a volume took.
import { defineMetric } from '@csiplug/core';

/**
 * Each waitForPlugin, by plugin type, the phase that waited (prerun,
 * restore, postrun…) and how it ended: `ready`, `timeout`, `aborted` or
 * `error`. The restart bug this project began with is a wait that should
 * have been long and was not; this is where such waits show.
 */
export const PLUGIN_WAIT_SECONDS = defineMetric({
  name: 'csiplug_plugin_wait_seconds',
  help: 'Waits for a CSI plugin to be registered and healthy, in seconds, by plugin type, phase and result',
  kind: 'histogram',
  labels: ['type', 'phase', 'result'],
  buckets: [0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
});

/**
 * Each node step of a volume (stage, publish, unpublish, unstage, expand),
 * by plugin and result (`ok` or `error`): the mount and unmount durations
 * a workload waits for. Time spent queued behind another step of the same
 * volume is included, as the caller waited for it too.
 */
export const VOLUME_STEP_SECONDS = defineMetric({
  name: 'csiplug_volume_step_seconds',
  help: 'Node steps of CSI volumes (stage, publish, unpublish, unstage, expand), in seconds, by plugin, step and result',
  kind: 'histogram',
  labels: ['plugin', 'step', 'result'],
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
});
