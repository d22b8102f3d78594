// requireRoot: the one door for tests that need root (real mounts, tmpfs,
// chown, runc). A non-root run fails them with one clear message instead of
// skipping them silently, so a green run never hides tests that did not run.
//
// Call it at the top of a test file whose every test needs root (jest then
// fails the file), or in a beforeAll / at the start of the tests that do.

/** What a non-root run of a root-only test fails with. */
export const NEEDS_ROOT_MESSAGE = 'this test needs root: run as root (CI does)';

/** Whether this process runs as root (uid 0). */
export function runsAsRoot(): boolean {
  return process.getuid?.() === 0;
}

/** Throws (failing the file or the test it is called in) unless this process runs as root. */
export function requireRoot(): void {
  if (!runsAsRoot()) throw new Error(NEEDS_ROOT_MESSAGE);
}
