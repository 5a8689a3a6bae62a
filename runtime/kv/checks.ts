// Argument checks of the KV bookkeeping: a bad count or index fails loudly where it is passed.

export function requireCount(name: string, value: number, min: number): void {
  if (Number.isInteger(value) && value >= min) return;
  throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
}

export function requireIndex(name: string, value: number, bound: number): void {
  if (Number.isInteger(value) && value >= 0 && value < bound) return;
  throw new RangeError(`${name} ${value} is out of range 0..${bound - 1}`);
}
