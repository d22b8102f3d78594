import { ValidationError } from '@csiplug/core';
import { formatSize, parseSize } from './size';

describe('parseSize', () => {
  it.each<[string | number, number]>([
    [0, 0],
    [1234, 1234],
    ['1234', 1234],
    ['512B', 512],
    ['1KiB', 1024],
    ['10MiB', 10 * 2 ** 20],
    ['1GiB', 2 ** 30],
    ['1gib', 2 ** 30],
    ['2TiB', 2 * 2 ** 40],
    ['1Gi', 2 ** 30],
    ['100MB', 100e6],
    ['100M', 100e6],
    ['1.5GB', 1.5e9],
    ['1.5KiB', 1536],
    [' 3 kb ', 3000],
  ])('parses %p', (input, bytes) => {
    expect(parseSize(input)).toBe(bytes);
  });

  it.each<[string | number, string]>([
    ['', 'cap: cannot parse size ""; use bytes or a number with a unit, like "512MiB", "10GiB" or "100MB"'],
    ['ten', 'cap: cannot parse size "ten"; use bytes or a number with a unit, like "512MiB", "10GiB" or "100MB"'],
    ['-1GiB', 'cap: cannot parse size "-1GiB"; use bytes or a number with a unit, like "512MiB", "10GiB" or "100MB"'],
    ['1XB', 'cap: cannot parse size "1XB"; use bytes or a number with a unit, like "512MiB", "10GiB" or "100MB"'],
    ['99999PiB', 'cap: size "99999PiB" is too large'],
    [-5, 'cap: -5 is not a whole, non-negative number of bytes'],
  ])('rejects %p', (input, message) => {
    expect(() => parseSize(input, 'cap')).toThrow(new ValidationError(message));
  });
});

describe('formatSize', () => {
  it.each<[number, string]>([
    [0, '0B'],
    [1000, '1000B'],
    [1024, '1KiB'],
    [10 * 2 ** 20, '10MiB'],
    [2 ** 30 + 2 ** 20, '1025MiB'],
    [2 ** 40, '1TiB'],
  ])('formats %p as %p', (bytes, text) => {
    expect(formatSize(bytes)).toBe(text);
    expect(parseSize(text)).toBe(bytes);
  });
});
