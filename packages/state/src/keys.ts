// Keys, names and values as bytes. Strings are UTF-8; byte order is memcmp
// order (shorter first on a common prefix), the order SQLite gives BLOBs.
import { ErrKeyTooLarge, ErrValueTooLarge } from './errors';

export type Key = Uint8Array | string;

/** bbolt's MaxKeySize. */
export const MAX_KEY_SIZE = 32768;
/** bbolt's MaxValueSize: (1 << 31) - 2. */
export const MAX_VALUE_SIZE = 2 ** 31 - 2;

/** A Buffer over the same bytes (no copy for Uint8Array input). */
export function toBytes(key: Key): Buffer {
  if (typeof key === 'string') return Buffer.from(key, 'utf8');
  if (key instanceof Uint8Array) return Buffer.isBuffer(key) ? key : Buffer.from(key.buffer, key.byteOffset, key.byteLength);
  throw new TypeError(`a key or bucket name must be a Uint8Array or a string, got ${typeof key}`);
}

export function checkKeySize(key: Buffer): void {
  if (key.length > MAX_KEY_SIZE) throw new ErrKeyTooLarge(key.length, MAX_KEY_SIZE);
}

export function toValue(value: Uint8Array): Buffer {
  if (!(value instanceof Uint8Array)) {
    throw new TypeError(
      `a value must be a Uint8Array, got ${value === null ? 'null' : typeof value}; use createBucket for a nested bucket`,
    );
  }
  if (value.byteLength > MAX_VALUE_SIZE) throw new ErrValueTooLarge(value.byteLength, MAX_VALUE_SIZE);
  return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
}

/** Readable form of a name for error messages. */
export function describeKey(key: Buffer): string {
  const text = key.toString('utf8');
  return Buffer.from(text, 'utf8').equals(key) ? text : `0x${key.toString('hex')}`;
}
