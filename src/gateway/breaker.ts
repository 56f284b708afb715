/**
 * The circuit breaker of one connector (interface 3 and 8, decisions §9): 5 consecutive
 * upstream errors open it; after 10 s (doubling per consecutive opening up to 5 min, ±20 %
 * jitter) it is half-open and lets exactly one trial call through; the trial's success closes
 * it, its failure re-opens it with the next, doubled wait. Only upstream errors count. Clock
 * and random source are injected so tests move time instead of sleeping.
 */
import type { Clock } from '../clock.js';

export type CircuitState = 'closed' | 'open' | 'half_open';

export interface BreakerOptions {
  clock: Clock;
  /** Uniform in [0, 1). (Default: Math.random) */
  random?: () => number;
  /** Consecutive upstream errors that open the circuit. (Default: 5) */
  threshold?: number;
  /** First open period, ms. (Default: 10000) */
  baseMs?: number;
  /** Longest open period, ms. (Default: 300000) */
  maxMs?: number;
  /** Relative jitter of each open period. (Default: 0.2) */
  jitter?: number;
  /** Called on every state change (metrics, logs). */
  onChange?: (state: CircuitState) => void;
}

/** What a caller learns when it asks to make a call. */
export type Admission = { ok: true; trial: boolean } | { ok: false; retryAfterMs: number };

export interface BreakerStatus {
  state: CircuitState;
  consecutive_failures: number;
  /** Consecutive openings without a success in between (the exponent of the wait). */
  openings: number;
  /** ISO time the open period ends, null when closed. */
  open_until: string | null;
}

export class CircuitBreaker {
  private stateValue: CircuitState = 'closed';
  private failures = 0;
  private openings = 0;
  private openUntil = 0;
  /** When the circuit last opened (clock ms): a clock found before it was stepped back. */
  private openedAt = 0;
  private trialInFlight = false;
  private readonly random: () => number;
  private readonly threshold: number;
  private readonly baseMs: number;
  private readonly maxMs: number;
  private readonly jitter: number;

  constructor(private readonly opts: BreakerOptions) {
    this.random = opts.random ?? Math.random;
    this.threshold = opts.threshold ?? 5;
    this.baseMs = opts.baseMs ?? 10_000;
    this.maxMs = opts.maxMs ?? 300_000;
    this.jitter = opts.jitter ?? 0.2;
  }

  /** The state as of now (an open circuit whose wait has passed reads as half-open). */
  get state(): CircuitState {
    if (this.stateValue === 'open') {
      const now = this.opts.clock.now();
      // The wall clock stepped back (NTP, a VM resumed): the wait starts again from now, its
      // length kept, rather than growing by the step (back an hour, the connector was refused
      // for an hour and 10 s).
      if (now < this.openedAt) {
        this.openUntil -= this.openedAt - now;
        this.openedAt = now;
      }
      if (now >= this.openUntil) this.set('half_open');
    }
    return this.stateValue;
  }

  /** The open period for the n-th consecutive opening (1-based), before jitter. */
  baseDelay(n: number): number {
    return Math.min(this.baseMs * 2 ** (n - 1), this.maxMs);
  }

  /** How long until an open circuit lets a trial through (0 when it is not open). */
  retryAfterMs(): number {
    return this.state === 'open' ? this.openUntil - this.opts.clock.now() : 0; // `state` reads half-open once the wait is over
  }

  /** Asks to make a call: closed lets it through; half-open lets one trial through. */
  admit(): Admission {
    const state = this.state;
    if (state === 'closed') return { ok: true, trial: false };
    if (state === 'half_open' && !this.trialInFlight) {
      this.trialInFlight = true;
      return { ok: true, trial: true };
    }
    return { ok: false, retryAfterMs: this.retryAfterMs() }; // open, or half-open with its trial out (0)
  }

  /** The upstream answered (a result, or a deterministic failure): closes the circuit. */
  success(): void {
    this.failures = 0;
    this.openings = 0;
    this.trialInFlight = false;
    if (this.stateValue !== 'closed') this.set('closed');
  }

  /**
   * The call ended without telling anything about the upstream (our own checks stopped it):
   * a half-open trial gives its slot back, nothing else changes.
   */
  neutral(trial: boolean): void {
    if (trial) this.trialInFlight = false;
  }

  /** An upstream error: counts towards opening; a failed trial re-opens with a doubled wait. */
  failure(trial = false): void {
    if (trial) {
      this.trialInFlight = false;
      this.open();
      return;
    }
    if (this.stateValue !== 'closed') return; // a straggler admitted before the circuit opened
    this.failures++;
    if (this.failures >= this.threshold) this.open();
  }

  private open(): void {
    this.openings++;
    const base = this.baseDelay(this.openings);
    const jittered = base * (1 + this.jitter * (2 * this.random() - 1));
    this.openedAt = this.opts.clock.now();
    this.openUntil = this.openedAt + Math.round(Math.min(jittered, this.maxMs));
    this.failures = 0;
    this.set('open');
  }

  private set(state: CircuitState): void {
    if (this.stateValue === state) return;
    this.stateValue = state;
    this.opts.onChange?.(state);
  }

  status(): BreakerStatus {
    const state = this.state;
    return {
      state,
      consecutive_failures: this.failures,
      openings: this.openings,
      open_until: state === 'closed' ? null : new Date(this.openUntil).toISOString(),
    };
  }
}
