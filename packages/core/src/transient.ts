// The one classifier of transient local faults: an errno that reports a
// fault of the agent's own process (out of file descriptors or memory,
// interrupted, busy) says nothing about the mount, file, process or plugin
// being looked at. The CSI manager and the task driver both ask it, so a
// flood of connections (EMFILE on every open) is read the same way
// everywhere: "unknown, try again", never "not mounted" or "gone".

/**
 * errno codes of a fault in the agent's own process — out of file
 * descriptors or memory, interrupted, busy — which say nothing about what
 * was being looked at.
 */
export const TRANSIENT_FS_ERROR_CODES: ReadonlySet<string> = new Set(['EMFILE', 'ENFILE', 'EAGAIN', 'ENOMEM', 'EINTR', 'EBUSY']);

/**
 * Whether `err`, or an error it was caused by, is a transient local fault
 * (see TRANSIENT_FS_ERROR_CODES): "unknown, try again", never "not mounted"
 * or "gone". Errors that wrap such a fault must carry it as their `cause`,
 * so this walk finds it.
 */
export function isTransientFsError(err: unknown): boolean {
  const seen = new Set<unknown>();
  for (let e = err; e !== null && typeof e === 'object' && !seen.has(e); e = (e as { cause?: unknown }).cause) {
    seen.add(e);
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && TRANSIENT_FS_ERROR_CODES.has(code)) return true;
  }
  return false;
}
