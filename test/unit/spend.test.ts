/**
 * Spend arithmetic (D §8): usage is added to a run, a run's budget less what its derived remits
 * reserve is what its steps may use (8.3), and a derive counts the run's usage in whole
 * micro-dollars rounded up so the run keeps at least what it has used.
 */
import { describe, expect, it } from 'vitest';
import { addSpend, roundUsd, spendLeft, usdMicro, usdMicroUp, usdNanos, wholeMicroUsd } from '../../src/spend.js';

describe('spend arithmetic (D §8)', () => {
  it('adds usage to a run: tokens and dollars both, dollars rounded to the nano-dollar', () => {
    expect(addSpend({ tokens: 10, usd: 0.1 }, { tokens: 5, usd: 0.2 })).toEqual({ tokens: 15, usd: 0.3 });
  });

  it('reads a missing or malformed usage member as zero, and no usage as none', () => {
    const run = { tokens: 10, usd: 0.5 };
    expect(addSpend(run, undefined)).toBe(run);
    expect(addSpend(run, { tokens: 3 })).toEqual({ tokens: 13, usd: 0.5 });
    expect(addSpend(run, { usd: 0.25 })).toEqual({ tokens: 10, usd: 0.75 });
    expect(addSpend(run, { tokens: 'many' as unknown as number, usd: Number.NaN })).toEqual(run);
  });

  it('leaves a budget less what is reserved for derived remits (D §8.3)', () => {
    expect(spendLeft({ tokens: 1000, usd: 1 }, { tokens: 300, usd: 0.7 })).toEqual({ tokens: 700, usd: 0.3 });
    expect(spendLeft({ tokens: 1000, usd: 1 }, { tokens: 0, usd: 0 })).toEqual({ tokens: 1000, usd: 1 });
  });

  it('charges a positive amount below half a nano-dollar as one nano-dollar, never as nothing', () => {
    expect(usdNanos(1e-12)).toBe(1);
    expect(usdNanos(0)).toBe(0);
    expect(usdNanos(0.3)).toBe(300_000_000);
  });

  it('counts used dollars in whole micro-dollars rounded up, so a derive never leaves the run under its usage (D §8.3)', () => {
    expect(usdMicroUp(0.0000011)).toBe(2);
    expect(usdMicroUp(0.000001)).toBe(1);
    expect(usdMicroUp(1e-12)).toBe(1);
    expect(usdMicroUp(0)).toBe(0);
    expect(usdMicro(0.0000011)).toBe(1);
    expect(wholeMicroUsd(0.1234567)).toBe(0.123457);
    expect(roundUsd(0.1 + 0.2)).toBe(0.3);
  });
});
