// src/kernel/unreported-usage.ts: the worker's rule (src/worker/step-history.ts) seen from the
// kernel — calls since a step's last step.failed or step.completed, each call index once.
import { describe, expect, it } from 'vitest';
import { unreportedUsage } from '../../src/kernel/unreported-usage.js';

const call = (step: string, call_index: number, usage: unknown, segment = 0) => ({ kind: 'model.called', payload: { source: 'worker', step, call_index, segment, usage } });

describe('unreportedUsage', () => {
  it('sums calls since the last failed or completed lease of each step, each call index of a segment once', () => {
    expect(
      unreportedUsage([
        call('a', 0, { tokens: 10, usd: 0.1 }),
        { kind: 'step.completed', payload: { step: 'a' } },
        call('b', 0, { tokens: 5, usd: 0.01 }),
        { kind: 'step.failed', payload: { step: 'b' } },
        call('b', 1, { tokens: 7, usd: 0.02 }),
        call('b', 1, { tokens: 7, usd: 0.02 }),
        call('b', 1, { tokens: 9, usd: 0.03 }, 1),
        { kind: 'step.failed', payload: { step: 'c', kind: 'compensation' } }, // a compensation's failure reports nothing of b's
      ]),
    ).toEqual({ tokens: 16, usd: 0.05 });
  });

  it('ignores what is not a worker usage', () => {
    expect(
      unreportedUsage([
        call('a', 0, { tokens: -1, usd: 0 }),
        call('a', 1, { tokens: 1, usd: Number.NaN }),
        call('a', 2, 'lots'),
        { kind: 'model.called', payload: { source: 'other', step: 'a', call_index: 3, usage: { tokens: 5, usd: 1 } } },
        { kind: 'note', payload: { step: 'a', usage: { tokens: 5, usd: 1 } } },
      ]),
    ).toEqual({ tokens: 0, usd: 0 });
  });

  it('charges a figure past what a report may say as that maximum, and never sums to Infinity (a posted 1e308 made abandon a 500)', () => {
    const huge = unreportedUsage([call('a', 0, { tokens: 2 ** 60, usd: 1e308 }), call('a', 1, { tokens: 2 ** 60, usd: 1e308 }), call('b', 0, { tokens: 2.5, usd: 1e300 })]);
    expect(huge).toEqual({ tokens: Number.MAX_SAFE_INTEGER, usd: 1e12 });
    expect(unreportedUsage([call('a', 0, { tokens: 2.5, usd: 0.5 })])).toEqual({ tokens: 3, usd: 0.5 });
  });
});
