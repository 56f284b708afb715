/**
 * Spend arithmetic shared by the kernel, the remit service and the worker (decisions §8):
 * token counts are integers; dollars are summed as floats rounded to 1e-9, so float noise
 * cannot make a replayed sum differ from the live one, and narrowed and reserved as whole
 * micro-dollars, so reservations add up exactly.
 */
import type { Spend } from './types.js';

/** A dollar sum rounded to 1e-9 (also keeps 0.30000000000000004 from showing). */
export function roundUsd(usd: number): number {
  return Math.round(usd * 1e9) / 1e9;
}

/**
 * A charge as whole nano-dollars: the nearest, but a positive charge is at least one (as the
 * worker charges it, src/worker/providers/usage.ts), so no number of calls below half a
 * nano-dollar adds up to nothing where calls are summed (src/kernel/unreported-usage.ts).
 */
export function usdNanos(usd: number): number {
  const n = Math.round(usd * 1e9);
  return n === 0 && usd > 0 ? 1 : n;
}

/** `a + b`, reading a partial or malformed `b` as zero where it says nothing usable. */
export function addSpend(a: Spend, b: Partial<Spend> | undefined): Spend {
  if (!b) return a;
  return { tokens: a.tokens + (Number(b.tokens) || 0), usd: roundUsd(a.usd + (Number(b.usd) || 0)) };
}

/** What `budget` leaves once `reserved` is set aside (a run's spend less its derived remits' share). */
export function spendLeft(budget: Spend, reserved: Spend): Spend {
  return { tokens: budget.tokens - reserved.tokens, usd: roundUsd(budget.usd - reserved.usd) };
}

/** Dollars as integer micro-dollars. */
export function usdMicro(usd: number): number {
  return Math.round(usd * 1_000_000);
}

/**
 * Dollars spent (summed to the nano-dollar) as whole micro-dollars rounded up: what a run has
 * used never counts for less than it is where a remit's spend is split (a derive).
 */
export function usdMicroUp(usd: number): number {
  return Math.ceil(usdNanos(usd) / 1000);
}

/** Dollars rounded to whole micro-dollars (the unit a remit's spend is counted in). */
export function wholeMicroUsd(usd: number): number {
  return usdMicro(usd) / 1_000_000;
}

/** Largest `usage.tokens` the kernel takes in a report (its schema's maximum). */
export const MAX_USAGE_TOKENS = Number.MAX_SAFE_INTEGER;

/**
 * Largest `usage.usd` the kernel takes in a report (its schema's maximum): an unbounded usd
 * (1e308) would sum to Infinity, which no event can carry (JCS has no Infinity).
 */
export const MAX_USAGE_USD = 1e12;

/** Largest `spend.usd` (a billion dollars; its micro-dollars stay exact in a double). */
export const MAX_SPEND_USD = 1e9;
