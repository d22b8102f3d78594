import { parseDuration } from './duration';
import { formatGoDuration } from './go-duration';

describe('formatGoDuration', () => {
  // The examples of Go's own time.Duration String test (src/time/time_test.go), in ms.
  it.each([
    [0, '0s'],
    [0.000001, '1ns'],
    [0.0011, '1.1µs'],
    [2.2, '2.2ms'],
    [3300, '3.3s'],
    [4 * 60_000 + 5000, '4m5s'],
    [4 * 60_000 + 5001, '4m5.001s'],
    [5 * 3_600_000 + 6 * 60_000 + 7001, '5h6m7.001s'],
    [8 * 60_000 + 0.000001, '8m0.000000001s'],
    [60_000, '1m0s'],
    [3_600_000, '1h0m0s'],
    [60_017, '1m0.017s'],
    [250, '250ms'],
    [1500, '1.5s'],
    [-1500, '-1.5s'],
  ])('%d ms is %s', (ms, text) => {
    expect(formatGoDuration(ms)).toBe(text);
  });

  it('prints what parseDuration reads back', () => {
    for (const ms of [1, 250, 1500, 60_000, 60_017, 5_400_000, 90_061_001]) expect(parseDuration(formatGoDuration(ms))).toBe(ms);
  });
});
