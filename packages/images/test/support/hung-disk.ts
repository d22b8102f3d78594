// A disk that hangs: the store's write of one blob never finishes and never
// reads its stream, ignoring any stop, as a write into a hung disk does. A
// real disk cannot be made to hang mid-write in a test, so the pull-fault
// tests inject this one fault at the store and keep the real registry and
// network around it.
import type { BlobStore } from '../../src/store/blob-store';

export interface HungWrite {
  /** Resolves when the store was first asked to write the blob (the pull is mid-layer). */
  readonly started: Promise<void>;
  /** Resolves with the error of the first other write that fails (e.g. a digest mismatch). */
  readonly otherWriteFailed: Promise<unknown>;
}

/**
 * The first write of `digest` into `blobs` hangs forever; other writes (and
 * later ones of it) are real. The writes of `holdUntilStarted` begin only
 * once the hung one has (so a sibling's failure cannot come first and stop
 * the pull before the write that hangs was ever asked for).
 */
export function hangFirstWriteOf(blobs: BlobStore, digest: string, holdUntilStarted: readonly string[] = []): HungWrite {
  let markStarted!: () => void;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  let markFailed!: (err: unknown) => void;
  const otherWriteFailed = new Promise<unknown>((resolve) => (markFailed = resolve));
  let hung = false;
  const realWrite = blobs.write.bind(blobs);
  jest.spyOn(blobs, 'write').mockImplementation((d, size, chunks, onProgress) => {
    if (d !== digest || hung) {
      const writing = (holdUntilStarted.includes(d) ? started : Promise.resolve()).then(() => realWrite(d, size, chunks, onProgress));
      writing.catch(markFailed);
      return writing;
    }
    hung = true;
    markStarted();
    return new Promise<string>(() => undefined);
  });
  return { started, otherWriteFailed };
}
