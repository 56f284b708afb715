/**
 * Retry timing of failed steps (decisions §6): delay = min(max_delay, initial_delay ×
 * 2^(attempt−1)) with ±20 % jitter, until max_attempts.
 */
import type { RetryPolicy } from '../types.js';

/** Defaults of a step's `retry` (decisions §4, §6). */
export const RETRY_DEFAULTS = { max_attempts: 3, initial_delay_ms: 1000, max_delay_ms: 60_000 } as const;

/** The retry policy with defaults filled in. */
export function retryPolicy(r: RetryPolicy | undefined): Required<RetryPolicy> {
  return {
    max_attempts: positiveInt(r?.max_attempts, RETRY_DEFAULTS.max_attempts),
    initial_delay_ms: nonNegative(r?.initial_delay_ms, RETRY_DEFAULTS.initial_delay_ms),
    max_delay_ms: nonNegative(r?.max_delay_ms, RETRY_DEFAULTS.max_delay_ms),
  };
}

function positiveInt(v: unknown, def: number): number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 ? v : def;
}
function nonNegative(v: unknown, def: number): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : def;
}

/**
 * Milliseconds to wait after failed attempt number `attempt` (1-based). `random` returns
 * [0, 1); 0.5 means no jitter.
 */
export function retryDelayMs(policy: Required<RetryPolicy>, attempt: number, random: () => number = Math.random): number {
  // The exponent is capped where the double still holds it: 2^1024 is Infinity, and a zero
  // initial delay times Infinity is NaN, which no event can carry.
  const base = Math.min(policy.max_delay_ms, policy.initial_delay_ms * 2 ** Math.min(1000, Math.max(0, attempt - 1)));
  const jitter = 1 + (random() * 2 - 1) * 0.2;
  return Math.max(0, Math.round(base * jitter));
}
