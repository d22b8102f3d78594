// Crash points: a test-only switch that makes the process SIGKILL itself at a
// named step, so the fault suite (packages/agent/test/chaos, bench/chaos) can
// aim a `kill -9` between two steps instead of hoping that a random one lands
// there (a claim-stage-publish takes ~50 ms; random kills mostly land after it).
//
//   CSIPLUG_CRASH_AT=<point>      die the first time <point> is reached
//   CSIPLUG_CRASH_AT=<point>:<n>  die the n-th time it is reached
//
// The variable is read once, when this module loads; unset, a crash point is
// one comparison. A value that names no point below (or a bad count) throws
// at load: a typo must not make a crash test pass without crashing. Before it
// dies the process writes one line to stderr, `csiplug: crash point <point>
// reached (CSIPLUG_CRASH_AT)`, so a test can tell this death from another.
//
// The points (CRASH_POINTS holds the same list; crashPoint() takes only these):
//
// the volume reconciler (packages/volumes/src/reconciler: volume-reconciler.ts; the unmount and
// forget points in unmount-steps.ts, the remount points in stale-remount.ts)
//   reconciler.want.after-write        a new record (desired mounted, nothing held) written
//   reconciler.claim.before-write      before `claimed` is written
//   reconciler.claim.after-write       `claimed` written, the claim not asked yet
//   reconciler.claim.after-call        the catalog granted the claim, its context not recorded
//   reconciler.stage.before-write      before `staged` is written
//   reconciler.stage.after-write       `staged` written, NodeStageVolume not called yet
//   reconciler.stage.after-call        NodeStageVolume returned
//   reconciler.publish.before-write    before `published` is written
//   reconciler.publish.after-write     `published` written, NodePublishVolume not called yet
//   reconciler.publish.after-call      NodePublishVolume returned, the paths not recorded
//   reconciler.publish.after-record    the paths recorded: the mount is complete
//   reconciler.unmount.before-write    an unmount asked for, `desired: unmounted` not written
//   reconciler.unmount.after-write     `desired: unmounted` written, no step taken
//   reconciler.unpublish.after-call    NodeUnpublishVolume returned, `published` still set
//   reconciler.unpublish.after-write   `published` cleared
//   reconciler.unstage.after-call      NodeUnstageVolume returned, `staged` still set
//   reconciler.unstage.after-write     `staged` cleared
//   reconciler.release.after-call      the catalog released the claim, `claimed` still set
//   reconciler.release.after-write     `claimed` cleared
//   reconciler.forget.before           nothing held; the record not deleted yet
//   reconciler.remount.intent.after-write   a stale mount's remount intent (`remounting`) written, no step taken
//   reconciler.remount.unpublish.after-call NodeUnpublishVolume of the remount returned, `published` still set
//   reconciler.remount.unpublish.after-write `published` cleared (the target path kept)
//   reconciler.remount.unstage.after-call   NodeUnstageVolume of the stale staging mount returned, `staged` still set
//   reconciler.remount.unstage.after-write  `staged` cleared; stage and publish not asked yet
// the volume catalog (packages/volumes/src/catalog/volume-catalog.ts)
//   catalog.claim.after-publishing-write  the controller publish recorded as under way, not called
//   catalog.claim.after-controller-publish ControllerPublishVolume returned, the claim not written
//   catalog.claim.after-write          the claim record written
//   catalog.release.after-controller-unpublish ControllerUnpublishVolume returned, the claim still written
//   catalog.release.after-write        the released record written
//   catalog.create.before-call         a create's intent written, CreateVolume not called yet
//   catalog.create.after-call          CreateVolume returned, the volume not recorded
//   catalog.expand.before-call         an expand's intent written, ControllerExpandVolume not called yet
//   catalog.expand.after-call          ControllerExpandVolume returned, the new capacity not recorded
//   catalog.delete.before-call         the volume marked deleting, DeleteVolume not called yet
//   catalog.delete.after-call          DeleteVolume returned, the volume still recorded
// the agent (packages/agent/src)
//   agent.run-job.after-save           a job's new allocs saved, not started
//   agent.plugin-update.after-new-healthy  a plugin job's new alloc healthy, the old one not stopped
//   alloc.postrun.before-unmount       an alloc's tasks stopped, its volumes not unmounted yet
//   alloc.postrun.after-unmount        its volumes unmounted, the alloc not saved yet
//
// Where a point sits is part of what it means: moving a call changes what the
// fault suite tests, so move the line here with it.
import { ValidationError } from './errors';

/** The environment variable that arms one crash point. */
export const CRASH_AT_ENV = 'CSIPLUG_CRASH_AT';

/** Every named crash point, with where it is (the file header says more). */
export const CRASH_POINTS = Object.freeze({
  'reconciler.want.after-write': 'a new mount record written, nothing held',
  'reconciler.claim.before-write': 'before claimed is written',
  'reconciler.claim.after-write': 'claimed written, the claim not asked yet',
  'reconciler.claim.after-call': 'the claim granted, its context not recorded',
  'reconciler.stage.before-write': 'before staged is written',
  'reconciler.stage.after-write': 'staged written, NodeStageVolume not called yet',
  'reconciler.stage.after-call': 'NodeStageVolume returned',
  'reconciler.publish.before-write': 'before published is written',
  'reconciler.publish.after-write': 'published written, NodePublishVolume not called yet',
  'reconciler.publish.after-call': 'NodePublishVolume returned, the paths not recorded',
  'reconciler.publish.after-record': 'the paths recorded',
  'reconciler.unmount.before-write': 'an unmount asked for, not written',
  'reconciler.unmount.after-write': 'desired unmounted written, no step taken',
  'reconciler.unpublish.after-call': 'NodeUnpublishVolume returned, published still set',
  'reconciler.unpublish.after-write': 'published cleared',
  'reconciler.unstage.after-call': 'NodeUnstageVolume returned, staged still set',
  'reconciler.unstage.after-write': 'staged cleared',
  'reconciler.release.after-call': 'the claim released, claimed still set',
  'reconciler.release.after-write': 'claimed cleared',
  'reconciler.forget.before': 'nothing held, the record not deleted yet',
  'reconciler.remount.intent.after-write': 'a remount intent written, no step taken',
  'reconciler.remount.unpublish.after-call': 'NodeUnpublishVolume of a remount returned, published still set',
  'reconciler.remount.unpublish.after-write': 'published cleared by a remount',
  'reconciler.remount.unstage.after-call': 'NodeUnstageVolume of a remount returned, staged still set',
  'reconciler.remount.unstage.after-write': 'staged cleared by a remount, not staged again yet',
  'catalog.claim.after-publishing-write': 'controller publish recorded as under way, not called',
  'catalog.claim.after-controller-publish': 'ControllerPublishVolume returned, the claim not written',
  'catalog.claim.after-write': 'the claim written',
  'catalog.release.after-controller-unpublish': 'ControllerUnpublishVolume returned, the claim still written',
  'catalog.release.after-write': 'the released record written',
  'catalog.create.before-call': "a create's intent written, CreateVolume not called",
  'catalog.create.after-call': 'CreateVolume returned, the volume not recorded',
  'catalog.expand.before-call': "an expand's intent written, ControllerExpandVolume not called",
  'catalog.expand.after-call': 'ControllerExpandVolume returned, the new capacity not recorded',
  'catalog.delete.before-call': 'the volume marked deleting, DeleteVolume not called',
  'catalog.delete.after-call': 'DeleteVolume returned, the volume still recorded',
  'agent.run-job.after-save': "a job's new allocs saved, not started",
  'agent.plugin-update.after-new-healthy': "a plugin job's new alloc healthy, the old one not stopped",
  'alloc.postrun.before-unmount': "an alloc's tasks stopped, its volumes not unmounted",
  'alloc.postrun.after-unmount': 'its volumes unmounted, the alloc not saved yet',
} as const);

export type CrashPointName = keyof typeof CRASH_POINTS;

/** What CSIPLUG_CRASH_AT asks for: die the `count`-th time `point` is reached. */
export interface CrashAt {
  point: CrashPointName;
  count: number;
}

/** A CSIPLUG_CRASH_AT value that names no crash point or has a bad count. */
export class CrashPointSpecError extends ValidationError {
  constructor(value: string, why: string) {
    super(`${CRASH_AT_ENV}="${value}": ${why}`, CRASH_AT_ENV);
  }
}

/** Reads a CSIPLUG_CRASH_AT value ("<point>" or "<point>:<n>"); undefined or empty = no crash point armed. */
export function parseCrashAt(value: string | undefined): CrashAt | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const text = value.trim();
  const colon = text.lastIndexOf(':');
  const name = colon < 0 ? text : text.slice(0, colon);
  let count = 1;
  if (colon >= 0) {
    const n = text.slice(colon + 1);
    count = /^\d+$/.test(n) ? Number(n) : NaN;
    if (!Number.isSafeInteger(count) || count < 1)
      throw new CrashPointSpecError(value, `the count after ":" must be a whole number from 1, got "${n}"`);
  }
  if (!Object.hasOwn(CRASH_POINTS, name))
    throw new CrashPointSpecError(value, `no crash point is named "${name}"; known: ${Object.keys(CRASH_POINTS).join(', ')}`);
  return { point: name as CrashPointName, count };
}

/**
 * A crash-point function for `at`: it calls `die` the `at.count`-th time it is
 * given `at.point`, and does nothing otherwise (nothing at all without `at`).
 */
export function crashPointFor(at: CrashAt | undefined, die: (point: CrashPointName) => void): (point: CrashPointName) => void {
  if (!at) return () => undefined;
  let reached = 0;
  return (point) => {
    if (point !== at.point) return;
    reached++;
    if (reached === at.count) die(point);
  };
}

function killThisProcess(point: CrashPointName): void {
  // stderr is synchronous for files and pipes on Linux: the line is out before the kill.
  process.stderr.write(`csiplug: crash point ${point} reached (${CRASH_AT_ENV}); killing this process with SIGKILL\n`);
  process.kill(process.pid, 'SIGKILL');
}

/**
 * Marks a named step. With CSIPLUG_CRASH_AT naming it (the n-th time, for
 * "<point>:<n>"), the process dies here by SIGKILL; otherwise nothing happens.
 */
export const crashPoint: (point: CrashPointName) => void = crashPointFor(parseCrashAt(process.env[CRASH_AT_ENV]), killThisProcess);
