/**
 * Numbers in flags and environment variables (svc's and the worker's), read as a person writes them: decimal digits
 * with an optional fraction, spaces around allowed. `Number()` alone also takes `0x10`,
 * `0b11`, `1e3` and `Infinity`, which nobody means as a budget or a number of seconds.
 */
const DECIMAL = /^\s*(\d+(\.\d*)?|\.\d+)\s*$/;
const WHOLE = /^\s*\d+\s*$/;

/** A non-negative decimal number, or null when `raw` is not one (or is past what a double holds). */
export function decimalOf(raw: string): number | null {
  if (!DECIMAL.test(raw)) return null;
  const n = Number(raw);
  return Number.isFinite(n) ? n : null; // 310 digits and more read as Infinity
}

/** A non-negative whole number, or null when `raw` is not one (or is past 2^53). */
export function wholeOf(raw: string): number | null {
  if (!WHOLE.test(raw)) return null;
  const n = Number(raw);
  return Number.isSafeInteger(n) ? n : null;
}
