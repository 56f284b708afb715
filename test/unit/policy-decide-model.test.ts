/**
 * Decisions 5.1 and 5.2 against a model written from their text: fast-check draws policy
 * sets (one to three policies of up to five rules, each `allow`, `deny` or `require_approval`
 * with or without `by`, over conditions built from atoms whose truth the model knows, joined
 * by `&&`, `||` and `!`, plus conditions that fail at decision time), and actions and runs; the
 * policy text is compiled by the real parser and decided by the real engine, and must give
 * what the rules say:
 * - the most restrictive matching effect wins (deny > approval_required > allow), and `rule`
 *   is the first matching rule with that effect, in policy_set order then source order;
 * - a condition that fails matches for deny and require_approval and not for allow, and is
 *   listed in `errors`;
 * - `approval_required` names the rule's `by`, else `role:<requested_by.manager>`;
 * - with no match, the default rule: a write to a system of record under a remit that is not
 *   autonomous needs the manager (`default/sor_write`), anything else is `default/allow`.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compilePolicy } from '../../src/policy/compile.js';
import { toPolicyAction, toPolicyRun } from '../../src/policy/corpus.js';
import { decide } from '../../src/policy/decide.js';

interface Case {
  tool: string;
  amount: number;
  writes: boolean;
  sor: boolean;
  department: string;
  autonomy: 'observe' | 'propose' | 'supervised' | 'autonomous';
}

/** The requester's manager: the approver when a rule names none, and of the default rule. */
const MANAGER = 'role:lead';

/** A condition as text, and its value for a case (null: it fails at decision time). */
interface Cond {
  text: string;
  value: (c: Case) => boolean | null;
}

const atom: fc.Arbitrary<Cond> = fc.oneof(
  fc.constantFrom(0, 50, 100, 200).map((n): Cond => ({ text: `action.args.amount > ${n}`, value: (c) => c.amount > n })),
  fc.constantFrom('billing.refund', 'billing.export').map((t): Cond => ({ text: `action.tool == "${t}"`, value: (c) => c.tool === t })),
  fc.constantFrom('support', 'ops').map((d): Cond => ({ text: `run.department == "${d}"`, value: (c) => c.department === d })),
  fc.constant<Cond>({ text: 'action.tool.startsWith("billing.")', value: () => true }),
  fc.constant<Cond>({ text: 'has(action.args.note)', value: () => false }),
  fc.constant<Cond>({ text: 'run.remit.autonomy == "autonomous"', value: (c) => c.autonomy === 'autonomous' }),
);

/** Conditions that always evaluate (so `&&`, `||` and `!` mean what they mean in JS). */
const sound: fc.Arbitrary<Cond> = fc.letrec<{ cond: Cond }>((tie) => ({
  cond: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    atom,
    fc.tuple(tie('cond'), tie('cond')).map(([a, b]): Cond => ({ text: `(${a.text}) && (${b.text})`, value: (c) => a.value(c)! && b.value(c)! })),
    fc.tuple(tie('cond'), tie('cond')).map(([a, b]): Cond => ({ text: `(${a.text}) || (${b.text})`, value: (c) => a.value(c)! || b.value(c)! })),
    tie('cond').map((a): Cond => ({ text: `!(${a.text})`, value: (c) => !a.value(c)! })),
  ),
})).cond;

/** A condition that fails when decided: a missing field read, a comparison of the wrong types, a value that is not a bool. */
const failing: fc.Arbitrary<Cond> = fc.constantFrom<Cond>(
  { text: 'action.args.missing > 1', value: () => null },
  { text: 'action.args.amount > "a lot"', value: () => null },
  { text: 'action.args.amount', value: () => null }, // a number, not a bool
);

interface Rule {
  effect: 'allow' | 'deny' | 'require_approval';
  by: string | null;
  cond: Cond;
}

const rule: fc.Arbitrary<Rule> = fc
  .record({
    effect: fc.constantFrom('allow' as const, 'deny' as const, 'require_approval' as const),
    by: fc.constantFrom(null, 'role:finance', 'role:legal'),
    cond: fc.oneof({ arbitrary: sound, weight: 5 }, { arbitrary: failing, weight: 1 }),
  })
  .map((r) => (r.effect === 'require_approval' ? r : { ...r, by: null })); // `by` belongs to approvals only

const policySet = fc.array(fc.array(rule, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 3 });

const caseArb: fc.Arbitrary<Case> = fc.record({
  tool: fc.constantFrom('billing.refund', 'billing.export'),
  amount: fc.constantFrom(0, 50, 100, 150, 250),
  writes: fc.boolean(),
  sor: fc.boolean(),
  department: fc.constantFrom('support', 'ops'),
  autonomy: fc.constantFrom('observe' as const, 'propose' as const, 'supervised' as const, 'autonomous' as const),
});

function source(rules: Rule[]): string {
  return rules.map((r, i) => `${r.effect} r${i}${r.by ? ` by "${r.by}"` : ''}\n  when ${r.cond.text}\n`).join('\n');
}

const RANK = { allow: 0, approval_required: 1, deny: 2 } as const;
const DECISION = { allow: 'allow', deny: 'deny', require_approval: 'approval_required' } as const;

/** What decisions 5.1 and 5.2 say the decision is. */
function expected(policies: Rule[][], c: Case): { decision: string; rule: string; approver: string | null; failed: boolean } {
  let winner: { decision: keyof typeof RANK; rule: string; approver: string | null } | null = null;
  let failed = false;
  policies.forEach((rules, p) =>
    rules.forEach((r, i) => {
      const v = r.cond.value(c);
      if (v === null) failed = true;
      const hit = v === null ? r.effect !== 'allow' : v;
      if (!hit) return;
      const decision = DECISION[r.effect];
      if (!winner || RANK[decision] > RANK[winner.decision]) {
        winner = { decision, rule: `p${p}/r${i}`, approver: decision === 'approval_required' ? (r.by ?? MANAGER) : null };
      }
    }),
  );
  if (winner) return { ...(winner as { decision: string; rule: string; approver: string | null }), failed };
  if (c.writes && c.sor && c.autonomy !== 'autonomous') return { decision: 'approval_required', rule: 'default/sor_write', approver: MANAGER, failed };
  return { decision: 'allow', rule: 'default/allow', approver: null, failed };
}

describe('policy decisions follow D 5.1–5.2 (a model of the rules, the real parser and engine)', () => {
  it('precedence, first match, fail-closed conditions, approvers and the default rule', () => {
    fc.assert(
      fc.property(policySet, caseArb, (policies, c) => {
        const compiled = policies.map((rules, p) => compilePolicy({ name: `p${p}`, version: '1' }, source(rules)));
        const action = toPolicyAction({ tool: c.tool, args: { amount: c.amount }, writes: c.writes, system_of_record: c.sor });
        const run = toPolicyRun({
          id: 'run_1',
          bundle: 'refunds',
          workflow: 'refund',
          department: c.department,
          requested_by: { id: 'ana', role: 'agent', manager: MANAGER.slice('role:'.length) },
          input: {},
          usage: { tokens: 0, usd: 0 },
          remit: { autonomy: c.autonomy, grants: [], tools: ['billing.*'], scopes: [] },
        });
        const got = decide(compiled, action, run);
        const want = expected(policies, c);
        const say = `${policies.map(source).join('---\n')}\n${JSON.stringify(c)}`;
        expect({ decision: got.decision, rule: got.rule, approver: got.approver }, say).toEqual({ decision: want.decision, rule: want.rule, approver: want.approver });
        expect(got.errors.length > 0, say).toBe(want.failed);
      }),
      { numRuns: 1000 },
    );
  });
});
