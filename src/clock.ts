/**
 * Time is injected everywhere it matters (remit expiry, leases, breakers, canaries) so that
 * tests move it instead of sleeping.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock that only moves when told to. */
export class ManualClock implements Clock {
  constructor(private ms: number = Date.parse('2026-11-22T10:00:00.000Z')) {}
  now(): number {
    return this.ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
  set(ms: number): void {
    this.ms = ms;
  }
}

/** Epoch seconds of a clock. */
export function epochSeconds(clock: Clock): number {
  return Math.floor(clock.now() / 1000);
}

let lastMs = NaN;
let lastIso = '';

/**
 * ISO 8601 UTC with milliseconds (decisions §1). A request asks for the same instant many
 * times over (each event's `at`, the model's `updated_at`, ready and expiry times), and a
 * Date plus its string were ≈1 % of a kernel cycle: the last answer is kept.
 */
export function isoTime(ms: number): string {
  if (ms !== lastMs) {
    lastIso = new Date(ms).toISOString(); // throws RangeError for NaN or out-of-range, as before
    lastMs = ms;
  }
  return lastIso;
}
