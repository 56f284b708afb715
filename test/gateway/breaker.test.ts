/**
 * The circuit breaker (interface 3 and 8; decisions §9) with a fake clock and a fixed random
 * source: 5 consecutive upstream errors open it, 10 s doubling to 5 min with ±20 % jitter,
 * one half-open trial, success closes, failure re-opens with the next doubled wait.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { CircuitBreaker, type CircuitState } from '../../src/gateway/breaker.js';

function breaker(random = () => 0.5) {
  const clock = new ManualClock(0);
  const changes: CircuitState[] = [];
  const b = new CircuitBreaker({ clock, random, onChange: (s) => changes.push(s) });
  return { b, clock, changes };
}

function fail(b: CircuitBreaker, n: number) {
  for (let i = 0; i < n; i++) {
    const a = b.admit();
    expect(a.ok).toBe(true);
    b.failure(a.ok && a.trial);
  }
}

describe('circuit breaker (interface 3: closed → open → half-open)', () => {
  it('stays closed through 4 consecutive upstream errors and opens on the 5th', () => {
    const { b } = breaker();
    fail(b, 4);
    expect(b.state).toBe('closed');
    fail(b, 1);
    expect(b.state).toBe('open');
    expect(b.admit()).toEqual({ ok: false, retryAfterMs: 10_000 });
  });

  it('a success in between resets the count (5 consecutive, not 5 in total)', () => {
    const { b } = breaker();
    fail(b, 4);
    b.success();
    fail(b, 4);
    expect(b.state).toBe('closed');
  });

  it('half-open after 10 s lets exactly one trial through; success closes it', () => {
    const { b, clock, changes } = breaker();
    fail(b, 5);
    clock.advance(9_999);
    expect(b.admit().ok).toBe(false);
    clock.advance(1);
    expect(b.state).toBe('half_open');
    const trial = b.admit();
    expect(trial).toEqual({ ok: true, trial: true });
    expect(b.admit().ok).toBe(false); // a second caller during the trial is refused
    b.success();
    expect(b.state).toBe('closed');
    expect(changes).toEqual(['open', 'half_open', 'closed']);
    expect(b.admit()).toEqual({ ok: true, trial: false });
  });

  it('a failed trial re-opens with the doubled wait, up to 5 minutes', () => {
    const { b, clock } = breaker();
    fail(b, 5);
    const waits: number[] = [];
    for (let i = 0; i < 8; i++) {
      const before = clock.now();
      const st = b.status();
      waits.push(Date.parse(st.open_until!) - before);
      clock.advance(waits[i]!);
      const a = b.admit();
      expect(a).toEqual({ ok: true, trial: true });
      b.failure(true);
    }
    expect(waits).toEqual([10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000]);
  });

  it('after closing, the next opening starts again at 10 s', () => {
    const { b, clock } = breaker();
    fail(b, 5);
    clock.advance(10_000);
    b.failure(b.admit().ok); // trial fails: 20 s
    clock.advance(20_000);
    expect(b.admit().ok).toBe(true);
    b.success();
    fail(b, 5);
    expect(b.admit()).toEqual({ ok: false, retryAfterMs: 10_000 });
  });

  it('jitter is ±20 % of the wait (random 0 → -20 %, random → 1 → +20 %, capped at 5 min)', () => {
    const low = breaker(() => 0);
    fail(low.b, 5);
    expect(low.b.admit()).toEqual({ ok: false, retryAfterMs: 8_000 });
    const high = breaker(() => 0.999999);
    fail(high.b, 5);
    const a = high.b.admit();
    expect(a.ok).toBe(false);
    expect((a as { retryAfterMs: number }).retryAfterMs).toBe(12_000);
    expect(high.b.baseDelay(10)).toBe(300_000);
  });

  it('a neutral end of a trial (our own 4xx) gives the slot back without deciding', () => {
    const { b, clock } = breaker();
    fail(b, 5);
    clock.advance(10_000);
    const a = b.admit();
    b.neutral(a.ok && a.trial);
    expect(b.state).toBe('half_open');
    expect(b.admit()).toEqual({ ok: true, trial: true });
  });

  it('stragglers admitted before the opening do not extend it', () => {
    const { b } = breaker();
    const early = b.admit();
    fail(b, 5);
    const until = b.status().open_until;
    b.failure(early.ok && early.trial);
    expect(b.status().open_until).toBe(until);
  });
});

describe('circuit breaker and a wall clock stepped back (interface 3: open → half-open "10 s after opening")', () => {
  it('back an hour, the open wait lasts at most its length again (10 s), not an hour and 10 s', () => {
    const clock = new ManualClock(3_600_000 + 5_000);
    const b = new CircuitBreaker({ clock, random: () => 0.5 });
    fail(b, 5);
    expect(b.state).toBe('open');
    clock.advance(4_000);
    clock.set(clock.now() - 3_600_000); // the step back, 4 s into the wait
    expect(b.admit()).toEqual({ ok: false, retryAfterMs: 10_000 });
    clock.advance(9_999);
    expect(b.state).toBe('open');
    clock.advance(1);
    expect(b.state).toBe('half_open');
  });
});
