/**
 * Usage as the kernel takes it (the `usage` of `POST /v1/leases/{id}/complete` and `/fail`:
 * `tokens` an integer from 0 to 2^53−1, `usd` a number from 0 to 1e12), made from whatever a
 * provider said. A count the kernel would refuse makes the report a 400, and a refused report
 * charges nothing: the lease expires, every re-lease replays the same answer, and the step ends
 * quarantined with no usage on the run. So what cannot be taken as it came errs on the side of
 * charging: fractions round up, and anything not a finite non-negative number (a negative, a
 * string that is not a number, 1e400 read as Infinity) or over the kernel's maximum counts as that maximum, which is
 * past any remit's spend, so the run fails `budget_exhausted` (svc-worker(1) FAILURES).
 */
import { MAX_USAGE_TOKENS, MAX_USAGE_USD, roundUsd } from '../../spend.js';
import type { Usage } from '../types.js';

export { MAX_USAGE_TOKENS, MAX_USAGE_USD };

/**
 * A token count as the kernel takes it: whole (fractions up), within 0 … MAX_USAGE_TOKENS;
 * a count written as a decimal string (`"12"`, as some OpenAI-compatible proxies send it) is
 * read as its number; anything unusable is the maximum.
 */
export function chargeableTokens(raw: unknown): number {
  if (typeof raw === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(raw)) raw = Number(raw);
  if (typeof raw !== 'number' || !Number.isFinite(raw) || raw < 0 || raw > MAX_USAGE_TOKENS) return MAX_USAGE_TOKENS;
  return Math.min(MAX_USAGE_TOKENS, Math.ceil(raw));
}

/** Dollars as the kernel takes them: within 0 … MAX_USAGE_USD, rounded as spend is; anything unusable is the maximum. */
export function chargeableUsd(raw: unknown): number {
  if (typeof raw !== 'number' || !Number.isFinite(raw) || raw < 0 || raw > MAX_USAGE_USD) return MAX_USAGE_USD;
  // roundUsd rounds to the nearest 1e-9: a charge of 4e-10 stays a charge.
  const usd = roundUsd(raw);
  return usd === 0 && raw > 0 ? 1e-9 : usd;
}

/** `u` as the kernel takes it (the worker's sums of several answers can pass its maximum too). */
export function chargeableUsage(u: Partial<Usage> | undefined): Usage {
  return { tokens: chargeableTokens(u?.tokens ?? 0), usd: chargeableUsd(u?.usd ?? 0) };
}
