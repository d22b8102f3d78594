// Every id that becomes part of a path is checked before it is used.
import { ValidationError } from './errors';

/**
 * Throws unless `id` is safe as one path component: non-empty, at most 255
 * bytes, no "/", no NUL, and not "." or "..". `what` names the id in the
 * error ("alloc id", "volume id", "plugin id").
 */
export function assertPathSafeId(id: unknown, what: string): asserts id is string {
  if (typeof id !== 'string' || id.length === 0) throw new ValidationError(`${what} is required`, what);
  // Control characters (newlines, escapes, DEL, C1) and line separators would forge lines in logs and status output.
  // eslint-disable-next-line no-control-regex
  const control = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/.exec(id);
  if (control) {
    const code = control[0].charCodeAt(0).toString(16).padStart(4, '0');
    throw new ValidationError(
      `${what} may not contain control characters (found U+${code.toUpperCase()} at position ${control.index})`,
      what,
    );
  }
  if (id.includes('/') || id.includes('\0') || id === '.' || id === '..' || id.includes('..')) {
    throw new ValidationError(`${what} "${id.replace(/\0/g, '\\0')}" is not allowed: it may not contain "/", "..", or NUL`, what);
  }
  if (Buffer.byteLength(id) > 255) throw new ValidationError(`${what} is longer than 255 bytes`, what);
}

export function isPathSafeId(id: unknown): id is string {
  try {
    assertPathSafeId(id, 'id');
    return true;
  } catch {
    return false;
  }
}
