import { formatKV, formatTable, formatTime, formatValue, orNone, shortId } from './format';

describe('format', () => {
  it('aligns table columns two spaces apart without trailing blanks', () => {
    expect(
      formatTable(
        ['ID', 'Name', 'Status'],
        [
          ['a', 'long-name', 'running'],
          ['bbbb', 'x', ''],
        ],
      ),
    ).toBe(['ID    Name       Status', 'a     long-name  running', 'bbbb  x'].join('\n'));
  });

  it('aligns key = value pairs', () => {
    expect(
      formatKV([
        ['ID', 'x'],
        ['Client Status', 'running'],
        ['Empty', ''],
      ]),
    ).toBe(['ID            = x', 'Client Status = running', 'Empty         ='].join('\n'));
  });

  it('formats times, ids and values', () => {
    expect(formatTime(Date.UTC(2026, 0, 2, 3, 4, 5, 678))).toBe('2026-01-02T03:04:05Z');
    expect(formatTime(undefined)).toBe('N/A');
    expect(formatTime(0)).toBe('N/A');
    expect(shortId('0123456789abcdef', false)).toBe('01234567');
    expect(shortId('0123456789abcdef', true)).toBe('0123456789abcdef');
    expect(orNone('')).toBe('<none>');
    expect(formatValue({ a: 1 })).toBe('{"a":1}');
    expect(formatValue(3)).toBe('3');
    expect(formatValue(null)).toBe('<none>');
  });
});
