/**
 * The refunds fixtures (decisions 5.3): policy versions 1 and 2 over the corpus give exactly the
 * decisions and flips written down in fixtures/corpora/refunds.flips.json.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { compilePolicy } from '../../src/policy/compile.js';
import { comparePolicies, comparePoliciesInSlices, normalizeCorpus } from '../../src/policy/corpus.js';
import { decide } from '../../src/policy/decide.js';
import { ROOT } from '../helpers/daemon.js';

const read = (p: string) => readFileSync(join(ROOT, p), 'utf8');
const v1 = compilePolicy({ name: 'refunds', version: '1.0.0' }, read('fixtures/policies/refunds-v1.policy'));
const v2 = compilePolicy({ name: 'refunds', version: '2.0.0' }, read('fixtures/policies/refunds-v2.policy'));
const corpus = normalizeCorpus(JSON.parse(read('fixtures/corpora/refunds.json')));
const written = JSON.parse(read('fixtures/corpora/refunds.flips.json')) as {
  cases: number;
  flips: Array<{ index: number; a: string; b: string; rule_a: string; rule_b: string }>;
  decisions: Array<{ index: number; a: string; rule_a: string; b: string; rule_b: string }>;
};

describe('refunds corpus (D 5.3)', () => {
  it('has at least 30 cases and the written-down count', () => {
    expect(corpus.length).toBeGreaterThanOrEqual(30);
    expect(written.cases).toBe(corpus.length);
  });

  it('decides every case under v1 and v2 as written down', () => {
    const got = corpus.map((c, index) => {
      const a = decide([v1], c.action, c.run);
      const b = decide([v2], c.action, c.run);
      return { index, a: a.decision, rule_a: a.rule, b: b.decision, rule_b: b.rule };
    });
    expect(got).toEqual(written.decisions);
  });

  it('finds exactly the written-down flips', () => {
    const result = comparePolicies(v1, v2, corpus);
    expect(result.cases).toBe(corpus.length);
    expect(result.flips).toEqual(written.flips);
    expect(result.flips.length).toBeGreaterThan(0);
  });

  it('a void proposed under a propose remit goes to the requester\'s manager under v2 (D 5.2)', () => {
    const flip = written.flips.find((f) => f.rule_b === 'refunds/void_by_proposer')!;
    const c = corpus[flip.index]!;
    expect(decide([v2], c.action, c.run).approver).toBe('role:support-lead');
  });
});

describe('approver changes with explain (svc\'s extension of D 5.3; svc(1) policy test)', () => {
  const a = compilePolicy({ name: 'p', version: '1' }, 'require_approval big by "role:finance" when action.args.amount > 100\nallow rest when true\n');
  const b = compilePolicy({ name: 'p', version: '2' }, 'require_approval big by "role:finance" when action.args.amount > 100 && action.args.amount <= 1000\nrequire_approval huge by "role:cfo" when action.args.amount > 1000\nallow rest when true\n');
  const cases = normalizeCorpus([50, 500, 5000, 20000].map((amount) => ({ action: { tool: 'billing.refund', args: { amount } } })));

  it('lists cases approval_required under both whose approver differs; they are no flips', async () => {
    const expected = [
      { index: 2, a: 'role:finance', b: 'role:cfo', rule_a: 'p/big', rule_b: 'p/huge' },
      { index: 3, a: 'role:finance', b: 'role:cfo', rule_a: 'p/big', rule_b: 'p/huge' },
    ];
    expect(comparePolicies(a, b, cases, true)).toEqual({ cases: 4, flips: [], approver_changes: expected });
    expect(await comparePoliciesInSlices(a, b, cases, { explain: true, sliceMs: 0 })).toEqual({ cases: 4, flips: [], approver_changes: expected });
  });

  it('without explain the answer keeps the contract\'s shape: no approver_changes member', async () => {
    expect(comparePolicies(a, b, cases)).toEqual({ cases: 4, flips: [] });
    expect(await comparePoliciesInSlices(a, b, cases)).toEqual({ cases: 4, flips: [] });
  });
});
