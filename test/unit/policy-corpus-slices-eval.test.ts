/**
 * POST /v1/policies/test evaluated in slices (decisions 5.3): comparePoliciesInSlices lets the
 * event loop turn between slices, and answers exactly what comparePolicies answers.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compilePolicy } from '../../src/policy/compile.js';
import { comparePolicies, comparePoliciesInSlices, normalizeCorpus } from '../../src/policy/corpus.js';
import { ROOT } from '../helpers/daemon.js';

const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
const v1 = compilePolicy({ name: 'refunds', version: '1.0.0' }, read('fixtures/policies/refunds-v1.policy'));
const v2 = compilePolicy({ name: 'refunds', version: '2.0.0' }, read('fixtures/policies/refunds-v2.policy'));
const refunds = normalizeCorpus(JSON.parse(read('fixtures/corpora/refunds.json')));

/** Turns of the event loop (setImmediate) while `work` runs. */
async function turnsDuring<T>(work: () => Promise<T>): Promise<{ value: T; turns: number }> {
  let turns = 0;
  let running = true;
  const tick = () => {
    if (!running) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  try {
    return { value: await work(), turns };
  } finally {
    running = false;
  }
}

describe('comparePoliciesInSlices (D 5.3)', () => {
  it('finds the flips comparePolicies finds, in order, however small the slices', async () => {
    const whole = comparePolicies(v1, v2, refunds);
    expect(whole.flips.length).toBeGreaterThan(0);
    for (const sliceMs of [0, 1, 10, 1000]) {
      expect(await comparePoliciesInSlices(v1, v2, refunds, { sliceMs })).toEqual(whole);
      expect(await comparePoliciesInSlices(v2, v1, refunds, { sliceMs })).toEqual(comparePolicies(v2, v1, refunds));
    }
  });

  it('gives the same answer for generated policies and corpora, errors and fail-closed rules included', async () => {
    const conditions = [
      'action.args.amount > 100',
      'action.args.amount <= 100',
      'int(action.summary) > 3', // fails closed on most summaries
      'action.tool.startsWith("billing.")',
      'run.remit.grants("pii")',
      'action.summary.matches("^[a-z]+$")',
      'action.args.amount', // not a bool: fails closed
    ];
    const effect = fc.constantFrom('allow', 'deny', 'require_approval');
    const policy = fc.array(fc.tuple(effect, fc.constantFrom(...conditions)), { minLength: 1, maxLength: 6 }).map((rules) =>
      rules.map(([e, c], i) => `${e} r${i} when ${c}`).join('\n'),
    );
    const kase = fc.record({
      action: fc.record({
        tool: fc.constantFrom('billing.refund', 'crm.export', 'ledger.post'),
        args: fc.record({ amount: fc.oneof(fc.integer({ min: -5, max: 300 }), fc.constant('150')) }),
        summary: fc.constantFrom('', '7', 'abc', 'ABC'),
        writes: fc.boolean(),
      }),
      run: fc.record({ remit: fc.record({ autonomy: fc.constantFrom('propose', 'supervised', 'autonomous'), grants: fc.subarray(['pii']) }) }),
    });
    await fc.assert(
      fc.asyncProperty(policy, policy, fc.array(kase, { maxLength: 20 }), fc.constantFrom(0, 1), async (sa, sb, corpus, sliceMs) => {
        const a = compilePolicy({ name: 'a', version: '1' }, sa);
        const b = compilePolicy({ name: 'b', version: '1' }, sb);
        const cases = normalizeCorpus(corpus);
        expect(await comparePoliciesInSlices(a, b, cases, { sliceMs })).toEqual(comparePolicies(a, b, cases));
      }),
      { numRuns: 200 },
    );
  });

  it('lets the event loop turn between slices', async () => {
    const { value, turns } = await turnsDuring(() => comparePoliciesInSlices(v1, v2, refunds, { sliceMs: 0 }));
    expect(value.cases).toBe(refunds.length);
    // A pause before every rule: at least one turn per case.
    expect(turns).toBeGreaterThanOrEqual(refunds.length);
  });

  it('stops between slices when its signal is aborted, with the signal\'s reason', async () => {
    const stop = new AbortController();
    const reason = new Error('client gone');
    let turns = 0;
    const tick = () => {
      if (++turns === 3) stop.abort(reason);
      else setImmediate(tick);
    };
    setImmediate(tick);
    await expect(comparePoliciesInSlices(v1, v2, refunds, { sliceMs: 0, signal: stop.signal })).rejects.toBe(reason);
    await expect(comparePoliciesInSlices(v1, v2, refunds, { signal: stop.signal })).rejects.toBe(reason);
  });
});
