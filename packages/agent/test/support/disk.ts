// A full filesystem for the tests that need one (the storage faults, the
// disk-full e2e and the fault suite's disk rounds): written to the last block.
import * as fs from 'fs';

/** Fills the filesystem of `file` to the last block (1 MiB, then 4 KiB, then 512-byte writes until ENOSPC). */
export function fillUp(file: string): void {
  const fd = fs.openSync(file, 'w');
  try {
    for (const size of [1 << 20, 1 << 12, 1 << 9]) {
      const chunk = Buffer.alloc(size, 1);
      for (;;) {
        try {
          fs.writeSync(fd, chunk);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw err;
        }
      }
    }
  } finally {
    fs.closeSync(fd);
  }
}
