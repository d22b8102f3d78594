// Comparing string maps (options, parameters, contexts) by value: the same
// keys with the same values, in any order.

export function sameStringMap(a: Readonly<Record<string, string>> | undefined, b: Readonly<Record<string, string>> | undefined): boolean {
  const x = a ?? {};
  const y = b ?? {};
  const keys = Object.keys(x);
  return keys.length === Object.keys(y).length && keys.every((k) => Object.prototype.hasOwnProperty.call(y, k) && x[k] === y[k]);
}
