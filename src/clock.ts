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

/** ISO 8601 UTC with milliseconds (decisions §1). */
export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}
