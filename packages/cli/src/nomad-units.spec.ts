import { humanizeIBytes, prettyTimeDiff } from './nomad-units';

const KiB = 1024;
const MiB = KiB * 1024;
const GiB = MiB * 1024;
const TiB = GiB * 1024;
const PiB = TiB * 1024;
const EiB = PiB * 1024;

describe('humanizeIBytes', () => {
  // go-humanize v1.0.1's own IBytes examples (bytes_test.go), then the issue's.
  it.each([
    [0, '0 B'],
    [1, '1 B'],
    [803, '803 B'],
    [1023, '1023 B'],
    [1024, '1.0 KiB'],
    [MiB - KiB, '1023 KiB'],
    [MiB, '1.0 MiB'],
    [GiB - MiB, '1023 MiB'],
    [GiB, '1.0 GiB'],
    [TiB - GiB, '1023 GiB'],
    [TiB, '1.0 TiB'],
    [PiB - TiB, '1023 TiB'],
    [PiB, '1.0 PiB'],
    [EiB - PiB, '1023 PiB'],
    [EiB, '1.0 EiB'],
    [5.5 * GiB, '5.5 GiB'],
    [1_000_000, '977 KiB'],
    [1000, '1000 B'],
    [1_048_576, '1.0 MiB'],
    [10 * MiB, '10 MiB'],
    [9.96 * MiB, '10 MiB'],
    [9.94 * MiB, '9.9 MiB'],
    // Go's %.0f takes an exact half to the even neighbour.
    [10.5 * KiB, '10 KiB'],
    [11.5 * KiB, '12 KiB'],
  ])('%d bytes is %s', (bytes, text) => {
    expect(humanizeIBytes(bytes)).toBe(text);
  });
});

describe('prettyTimeDiff', () => {
  const now = Date.UTC(2026, 5, 1, 12, 0, 0);
  const s = 1000;
  const m = 60 * s;
  const h = 60 * m;
  // Nomad's own examples (command/helpers_test.go TestPrettyTimeDiff): [first, second] as offsets from now.
  it.each([
    [-10, 0, '0s ago'],
    [-740 * s, 0, '12m20s ago'],
    [-12 * m, 0, '12m ago'],
    [-60 * m, 0, '1h ago'],
    [-80 * m, 0, '1h20m ago'],
    [-6 * h, 0, '6h ago'],
    [0, -6 * h, '6h from now'],
    [-22165 * s, 0, '6h9m ago'],
    [-100 * h, 0, '4d4h ago'],
    [-438000 * m, 0, '10mo4d ago'],
    [-20460 * h, 0, '2y4mo ago'],
    // Each time is rounded to the second first, as Go's Round(time.Second) does.
    // (a half second rounds up, to the later second).
    [-12 * m - 500, 0, '12m ago'],
    [-12 * m - 501, 0, '12m1s ago'],
  ])('from now + %d ms to now + %d ms is %s', (first, second, text) => {
    expect(prettyTimeDiff(now + first, now + second)).toBe(text);
  });

  it('is empty for an unset time', () => {
    expect(prettyTimeDiff(undefined, now)).toBe('');
    expect(prettyTimeDiff(0, now)).toBe('');
  });
});
