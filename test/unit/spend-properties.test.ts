/**
 * Spend arithmetic (D §8, 8.3) as properties: sums of charges neither lose nor invent money to
 * the nano-dollar, reservations and what is left add back up to the budget, the budget check
 * is the integer comparison it stands for, and the unreported usage abandon charges is the
 * usage of the calls no lease reported, each counted once.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { budgetExceeded } from '../../src/kernel/run-engine.js';
import { unreportedUsage } from '../../src/kernel/unreported-usage.js';
import { addSpend, MAX_SPEND_USD, roundUsd, spendLeft, usdMicro, usdMicroUp, usdNanos, wholeMicroUsd } from '../../src/spend.js';

/** A charge in whole nano-dollars (as the worker charges, src/worker/providers/usage.ts), up to $10. */
const nanos = fc.integer({ min: 0, max: 10_000_000_000 });
const micros = fc.integer({ min: 0, max: MAX_SPEND_USD * 1_000_000 });

describe('sums of charges (D §8: usage is added to the run)', () => {
  it('adding whole-nano charges with addSpend gives their exact sum, in any order', () => {
    fc.assert(
      fc.property(fc.array(fc.record({ tokens: fc.nat(1_000_000), nanos }), { maxLength: 60 }), (charges) => {
        let total = { tokens: 0, usd: 0 };
        for (const c of charges) total = addSpend(total, { tokens: c.tokens, usd: c.nanos / 1e9 });
        let reversed = { tokens: 0, usd: 0 };
        for (const c of [...charges].reverse()) reversed = addSpend(reversed, { tokens: c.tokens, usd: c.nanos / 1e9 });
        const exact = charges.reduce((s, c) => s + c.nanos, 0);
        expect(Math.round(total.usd * 1e9)).toBe(exact);
        expect(total.usd).toBe(roundUsd(exact / 1e9));
        expect(reversed).toEqual(total);
        expect(total.tokens).toBe(charges.reduce((s, c) => s + c.tokens, 0));
      }),
      { numRuns: 500 },
    );
  });

  it('a missing or malformed part of a charge adds nothing, and never makes the sum NaN', () => {
    const junk = fc.oneof(fc.constant(undefined), fc.constant(null), fc.constant('x'), fc.constant(NaN), fc.constant({}), fc.constant([]));
    fc.assert(
      fc.property(fc.record({ tokens: fc.nat(1000), usd: nanos.map((n) => n / 1e9) }), junk, junk, (a, t, u) => {
        const sum = addSpend(a, { tokens: t, usd: u } as never);
        expect(sum).toEqual({ tokens: a.tokens, usd: roundUsd(a.usd) });
      }),
      { numRuns: 200 },
    );
  });

  it('usdNanos charges a positive amount at least one nano-dollar, and is monotone', () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 1e6, noNaN: true }), fc.double({ min: 0, max: 1e6, noNaN: true }), (a, b) => {
        if (a > 0) expect(usdNanos(a)).toBeGreaterThanOrEqual(1);
        if (a <= b) expect(usdNanos(a)).toBeLessThanOrEqual(usdNanos(b));
      }),
      { numRuns: 500 },
    );
  });
});

describe('reservations (D 8.3: a derived remit reserves from the parent\'s unreserved budget)', () => {
  it('what is left plus what is reserved is the budget, to the micro-dollar', () => {
    fc.assert(
      fc.property(micros, micros, fc.nat(), fc.nat(), (budget, reserved, bt, rt) => {
        const left = spendLeft({ tokens: bt, usd: budget / 1e6 }, { tokens: rt, usd: reserved / 1e6 });
        expect(left.tokens + rt).toBe(bt);
        expect(usdMicro(left.usd) + reserved).toBe(budget);
      }),
      { numRuns: 500 },
    );
  });

  it('wholeMicroUsd rounds once: its micro-dollars are those of the amount, and rounding again changes nothing', () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: MAX_SPEND_USD, noNaN: true }), (usd) => {
        const whole = wholeMicroUsd(usd);
        expect(usdMicro(whole)).toBe(usdMicro(usd));
        expect(wholeMicroUsd(whole)).toBe(whole);
        expect(Math.abs(whole - usd)).toBeLessThanOrEqual(0.5e-6 + usd * Number.EPSILON);
      }),
      { numRuns: 1000 },
    );
  });

  it('usage counted in micro-dollars for a derive is rounded up, never down, and by less than one', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1e15 }), (n) => {
        const up = usdMicroUp(n / 1e9);
        expect(up * 1000).toBeGreaterThanOrEqual(n);
        expect(up * 1000).toBeLessThan(n + 1000);
      }),
      { numRuns: 1000 },
    );
  });

  it('the budget check is the integer comparison it stands for: usage over budget less reservations (D §8)', () => {
    // Usage up to a million dollars in nano-dollars; budget and reservations in micro-dollars.
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1e15 }), fc.integer({ min: 0, max: 1e12 }), fc.integer({ min: 0, max: 1e12 }), fc.nat(1000), fc.nat(1000), fc.nat(1000), (used, budget, reserved, ut, bt, rt) => {
        const over = budgetExceeded({ tokens: ut, usd: used / 1e9 }, { tokens: bt, usd: budget / 1e6 }, { tokens: rt, usd: reserved / 1e6 });
        expect(over).toBe(ut > bt - rt || used > (budget - reserved) * 1000);
      }),
      { numRuns: 1000 },
    );
    // At the edge: exactly the budget is not over it; one nano-dollar more is.
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1e12 }), fc.integer({ min: 0, max: 1e12 }), (budget, reserved) => {
        fc.pre(budget >= reserved);
        const left = (budget - reserved) * 1000;
        const b = { tokens: 0, usd: budget / 1e6 };
        const r = { tokens: 0, usd: reserved / 1e6 };
        expect(budgetExceeded({ tokens: 0, usd: left / 1e9 }, b, r)).toBe(false);
        expect(budgetExceeded({ tokens: 0, usd: (left + 1) / 1e9 }, b, r)).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('unreported usage (D §8: abandon charges what no lease reported)', () => {
  const ev = fc.oneof(
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('model.called'), payload: fc.record({ step: fc.constantFrom('a', 'b'), source: fc.constant('worker'), call_index: fc.nat(3), segment: fc.nat(1), usage: fc.record({ tokens: fc.nat(100), usd: nanos.map((n) => n / 1e9) }) }) }) },
    fc.record({ kind: fc.constantFrom('step.completed', 'step.failed'), payload: fc.record({ step: fc.constantFrom('a', 'b'), kind: fc.constantFrom('step', 'compensation') }) }),
  );

  it('is the usage of each step\'s calls since its last report, a call recorded twice counted once (its last record)', () => {
    fc.assert(
      fc.property(fc.array(ev, { maxLength: 30 }), (events) => {
        // Reference: per step, the open segment's calls by (segment, call index), last record wins.
        const open = new Map<string, Map<string, { tokens: number; nanos: number }>>();
        for (const e of events) {
          const p = e.payload as { step: string; kind?: string; call_index?: number; segment?: number; usage?: { tokens: number; usd: number } };
          if (e.kind === 'step.completed' || (e.kind === 'step.failed' && p.kind !== 'compensation')) open.delete(p.step);
          else if (e.kind === 'model.called') {
            if (!open.has(p.step)) open.set(p.step, new Map());
            open.get(p.step)!.set(`${p.segment}/${p.call_index}`, { tokens: p.usage!.tokens, nanos: Math.round(p.usage!.usd * 1e9) });
          }
        }
        let tokens = 0;
        let n = 0;
        for (const calls of open.values()) for (const c of calls.values()) (tokens += c.tokens), (n += c.nanos);
        const got = unreportedUsage(events);
        expect(got.tokens).toBe(tokens);
        expect(Math.round(got.usd * 1e9)).toBe(n);
      }),
      { numRuns: 500 },
    );
  });
});
