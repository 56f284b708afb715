/** Order statistics for benchmark samples. */

export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[idx]!;
}

export const median = (s: readonly number[]): number => quantile(s, 0.5);
export const p99 = (s: readonly number[]): number => quantile(s, 0.99);

/** Nanosecond-resolution timer in milliseconds. */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
