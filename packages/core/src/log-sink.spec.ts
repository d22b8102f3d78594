import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { LogSink } from './log-sink';

describe('LogSink', () => {
  it('drops and counts a line the fd refuses (ENOSPC of /dev/full), never throws', () => {
    const fd = fs.openSync('/dev/full', 'w');
    try {
      const sink = new LogSink(fd, () => 'notice\n');
      expect(() => sink.write('a\n')).not.toThrow();
      sink.write('b\n');
      expect(sink.droppedLines).toBe(2);
    } finally {
      fs.closeSync(fd);
    }
  });

  it('says once how many lines it dropped and why, before the first line that gets through', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'log-sink-'));
    const file = path.join(dir, 'log');
    const good = fs.openSync(file, 'w');
    // A descriptor of the same file, closed: every write fails (EBADF) until it is made good again.
    const bad = fs.openSync(file, 'a');
    const fdNo = bad;
    fs.closeSync(bad);
    try {
      const sink = new LogSink(fdNo, (n, why) => `dropped ${n} (${why})\n`);
      sink.write('lost 1\n');
      sink.write('lost 2\n');
      // The number is open again, on the log file.
      const again = fs.openSync(file, 'a');
      expect(again).toBe(fdNo);
      sink.write('kept\n');
      sink.write('kept too\n');
      fs.closeSync(again);
      expect(fs.readFileSync(file, 'utf8')).toBe('dropped 2 (EBADF)\nkept\nkept too\n');
      expect(sink.droppedLines).toBe(2);
    } finally {
      fs.closeSync(good);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
