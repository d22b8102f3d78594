// The time conversions between csiplug's milliseconds and Nomad's wire forms.
import { GO_ZERO_TIME, goTimeToMs, msToGoTime, msToUnixNano, unixNanoToMs } from './nomad-time';

describe("Nomad's times on the wire", () => {
  it('milliseconds round-trip through Unix nanoseconds, as JSON prints and reads them', () => {
    for (const ms of [0, 1, 1_733_325_000_123, Date.UTC(2099, 11, 31, 23, 59, 59, 999)]) {
      const wire = JSON.parse(JSON.stringify({ CreateTime: msToUnixNano(ms) })) as { CreateTime: number };
      expect(unixNanoToMs(wire.CreateTime)).toBe(ms);
    }
    // An integer on the wire, as Go's int64 decoder needs (no exponent, no fraction).
    expect(JSON.stringify(msToUnixNano(1_733_325_000_123))).toMatch(/^\d+$/);
  });

  it("a time never set is Go's zero time, and reads back as never", () => {
    expect(msToGoTime(undefined)).toBe(GO_ZERO_TIME);
    expect(goTimeToMs(GO_ZERO_TIME)).toBeUndefined();
    expect(goTimeToMs('0001-01-01T00:00:00.000Z')).toBeUndefined();
    expect(goTimeToMs(msToGoTime(1_733_325_000_123))).toBe(1_733_325_000_123);
    // Go writes nanoseconds and offsets; both read.
    expect(goTimeToMs('2024-12-04T16:30:00.123456789+01:00')).toBe(Date.UTC(2024, 11, 4, 15, 30, 0, 123));
    expect(goTimeToMs('not a time')).toBeUndefined();
    expect(goTimeToMs(42)).toBeUndefined();
  });
});
