// The log route's pieces that need no server: the limit rule and which
// bytes of a range make whole UTF-8 characters (what the ApiClient's text
// answer keeps).
import { logLimit } from './alloc-logs';
import { utf8Window } from './wire/alloc-wire';

const b = (...bytes: number[]) => Buffer.from(bytes);

describe('logLimit', () => {
  it('reads to the end unless asked for less, and refuses 0 bytes', () => {
    expect(logLimit(undefined)).toBeUndefined();
    expect(logLimit(10)).toBe(10);
    expect(logLimit(100 * 1024 * 1024)).toBe(100 * 1024 * 1024);
    expect(() => logLimit(0)).toThrow(/at least 1 byte/);
  });
});

describe('utf8Window', () => {
  const euro = [0xe2, 0x82, 0xac];

  it('keeps whole characters as they are', () => {
    expect(utf8Window(Buffer.from('a€b'), true, true)).toEqual({ skip: 0, keep: 5 });
    expect(utf8Window(Buffer.alloc(0), true, false)).toEqual({ skip: 0, keep: 0 });
  });

  it('skips the tail of a character cut at the front, but only inside the file', () => {
    expect(utf8Window(b(0x82, 0xac, 0x61), true, false)).toEqual({ skip: 2, keep: 1 });
    // At the start of the file nothing was cut: stray bytes are the file's own, shown as U+FFFD.
    expect(utf8Window(b(0x82, 0xac, 0x61), false, false)).toEqual({ skip: 0, keep: 3 });
    // At most 3: more continuation bytes in a row are not UTF-8 at all.
    expect(utf8Window(b(0x80, 0x80, 0x80, 0x80, 0x61), true, false)).toEqual({ skip: 3, keep: 2 });
  });

  it('leaves out a character cut at the back', () => {
    expect(utf8Window(b(0x61, ...euro.slice(0, 2)), false, true)).toEqual({ skip: 0, keep: 1 });
    expect(utf8Window(b(0x61, 0xf0, 0x9f, 0x98), false, false)).toEqual({ skip: 0, keep: 1 });
    expect(utf8Window(b(0x61, ...euro), false, true)).toEqual({ skip: 0, keep: 4 });
  });

  it('keeps a cut character rather than answer nothing when only the limit stops the reader', () => {
    expect(utf8Window(b(0xe2), false, true)).toEqual({ skip: 0, keep: 1 });
    // At the end of the file, nothing is right: the rest is probably being written.
    expect(utf8Window(b(0xe2, 0x82), false, false)).toEqual({ skip: 0, keep: 0 });
    // Skipping already moves the reader on.
    expect(utf8Window(b(0x82, 0xf0, 0x9f), true, true)).toEqual({ skip: 1, keep: 0 });
  });

  it('does not judge bytes that are not UTF-8', () => {
    expect(utf8Window(b(0x61, 0xff), false, true)).toEqual({ skip: 0, keep: 2 });
    expect(utf8Window(b(0x61, 0xf8), false, true)).toEqual({ skip: 0, keep: 2 });
  });
});
