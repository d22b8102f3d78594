// The conformance suites run once per backend: the SQLite store in a fresh
// temp dir, and the in-memory twin. `useBackend` wires setup and cleanup.
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { DB, type DBOptions } from '../../src/db';

export type BackendKind = 'sqlite' | 'memory';
export const BACKENDS: BackendKind[] = ['sqlite', 'memory'];

export interface BackendHandle {
  readonly kind: BackendKind;
  /** The DB opened for the current test. */
  readonly db: DB;
  /** Opens another DB of the same kind (closed after the test). */
  open(options?: DBOptions): DB;
}

export function tempDir(prefix = 'csiplug-state-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export function useBackend(kind: BackendKind, options: DBOptions = {}): BackendHandle {
  let dir: string | undefined;
  let current: DB | undefined;
  const opened: DB[] = [];
  let n = 0;
  const open = (o: DBOptions = options): DB => {
    const db = kind === 'sqlite' ? DB.open(path.join(dir!, `db-${n++}.db`), o) : DB.openMemory(o);
    opened.push(db);
    return db;
  };
  beforeEach(() => {
    dir = kind === 'sqlite' ? tempDir() : undefined;
    current = open();
  });
  afterEach(() => {
    for (const db of opened.splice(0)) db.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });
  return {
    kind,
    get db() {
      return current!;
    },
    open,
  };
}

/** Runs `fn` and returns the error it throws (failing the test if it does not throw). */
export function thrown(fn: () => unknown): Error & { code?: string } {
  try {
    fn();
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('expected an error, none was thrown');
}

/** A small seeded PRNG so random tests repeat. */
export function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Random key/value items with distinct keys (bbolt's testdata for quick checks). */
export function randomItems(seed: number, count: number, maxKey = 64, maxValue = 128): { key: Buffer; value: Buffer }[] {
  const rnd = prng(seed);
  const seen = new Set<string>();
  const out: { key: Buffer; value: Buffer }[] = [];
  while (out.length < count) {
    const key = Buffer.from(Array.from({ length: 1 + Math.floor(rnd() * maxKey) }, () => Math.floor(rnd() * 256)));
    const hex = key.toString('hex');
    if (seen.has(hex)) continue;
    seen.add(hex);
    out.push({ key, value: Buffer.from(Array.from({ length: Math.floor(rnd() * maxValue) }, () => Math.floor(rnd() * 256))) });
  }
  return out;
}

export function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}
