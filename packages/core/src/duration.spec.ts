import { formatDuration, parseDuration } from './duration';
import { ValidationError } from './errors';

describe('parseDuration', () => {
  it.each([
    ['250ms', 250],
    ['30s', 30_000],
    ['1m', 60_000],
    ['24h', 86_400_000],
    ['1h30m', 5_400_000],
    ['1.5s', 1500],
    ['0', 0],
    ['500us', 0.5],
    [' 2s ', 2000],
  ])('%s is %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it('takes numbers as milliseconds', () => {
    expect(parseDuration(1500)).toBe(1500);
  });

  it.each(['', '10', 'abc', '5 s', '-1s', '1x', 's', '1m-'])('rejects %p with a clear error', (text) => {
    expect(() => parseDuration(text, 'timeouts.probe')).toThrow(ValidationError);
    expect(() => parseDuration(text, 'timeouts.probe')).toThrow(/timeouts\.probe/);
  });

  it('rejects negative and non-finite numbers', () => {
    expect(() => parseDuration(-1)).toThrow(ValidationError);
    expect(() => parseDuration(Number.NaN)).toThrow(ValidationError);
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [250, '250ms'],
    [30_000, '30s'],
    [90_000, '1m30s'],
    [86_400_000, '24h'],
  ])('%d ms is %s and parses back', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
    expect(parseDuration(text)).toBe(ms);
  });
});
