/**
 * The decision engine of decisions 5.2 and the fail-closed evaluation of decisions 5.1.
 */
import { describe, expect, it } from 'vitest';
import { compilePolicy, type CompiledPolicy } from '../../src/policy/compile.js';
import { decide } from '../../src/policy/decide.js';
import { toPolicyAction } from '../../src/policy/corpus.js';
import { policyRun } from '../helpers/policy-context.js';
import type { Autonomy, PolicyAction, PolicyRunContext } from '../../src/types.js';

const policy = (name: string, source: string): CompiledPolicy => compilePolicy({ name, version: '1' }, source);

function action(over: Partial<PolicyAction> = {}): PolicyAction {
  return toPolicyAction({ tool: 'billing.refund', args: { amount: 50 }, writes: true, system_of_record: true, ...over });
}

function run(autonomy: Autonomy = 'supervised', over: Record<string, unknown> = {}): PolicyRunContext {
  return policyRun({
    input: { invoice_id: 'inv_1', tier: 'gold', count: 3 },
    usage: { tokens: 1200, usd: 0.75 },
    remit: { autonomy, grants: ['pii'], tools: ['billing.*'], scopes: ['sql:table:*'] },
    ...over,
  });
}

describe('default rule (D 5.2, I 2.3)', () => {
  it('a write to a system of record needs the manager when not autonomous', () => {
    for (const autonomy of ['observe', 'propose', 'supervised'] as const) {
      expect(decide([], action(), run(autonomy))).toEqual({
        decision: 'approval_required',
        rule: 'default/sor_write',
        approver: 'role:support-lead',
        matched: [],
        errors: [],
      });
    }
  });

  it('is allow under an autonomous remit', () => {
    expect(decide([], action(), run('autonomous'))).toMatchObject({ decision: 'allow', rule: 'default/allow', approver: null });
  });

  it('is allow for reads and for writes outside the systems of record', () => {
    expect(decide([], action({ writes: false }), run())).toMatchObject({ decision: 'allow', rule: 'default/allow' });
    expect(decide([], action({ system_of_record: false }), run())).toMatchObject({ decision: 'allow', rule: 'default/allow' });
  });

  it('applies only when no rule matched: a matching allow wins over it', () => {
    const p = policy('p', 'allow refunds when action.tool == "billing.refund"');
    expect(decide([p], action(), run())).toMatchObject({ decision: 'allow', rule: 'p/refunds', approver: null });
  });

  it('applies when policies exist but none of their rules match', () => {
    const p = policy('p', 'deny never when action.tool == "nothing.here"');
    expect(decide([p], action(), run())).toMatchObject({ decision: 'approval_required', rule: 'default/sor_write', matched: [] });
  });
});

describe('most restrictive wins; rule naming (D 5.2)', () => {
  const a = policy('alpha', ['allow ok when true', 'require_approval check by "role:finance" when action.args.amount > 10', 'deny stop when action.args.amount > 100'].join('\n'));
  const b = policy('beta', ['require_approval review when true', 'deny block when action.args.amount > 100'].join('\n'));

  it('deny > approval_required > allow, across rules', () => {
    expect(decide([a], action({ args: { amount: 5 } }), run()).decision).toBe('allow');
    expect(decide([a], action({ args: { amount: 50 } }), run()).decision).toBe('approval_required');
    expect(decide([a], action({ args: { amount: 500 } }), run()).decision).toBe('deny');
  });

  it('names the first matching rule of the winning effect in policy_set order', () => {
    expect(decide([a, b], action({ args: { amount: 500 } }), run()).rule).toBe('alpha/stop');
    expect(decide([b, a], action({ args: { amount: 500 } }), run()).rule).toBe('beta/block');
  });

  it('names the first in source order within a policy', () => {
    const p = policy('p', 'deny first when true\ndeny second when true');
    expect(decide([p], action(), run()).rule).toBe('p/first');
  });

  it('a later, more restrictive rule beats an earlier, weaker one', () => {
    expect(decide([a, b], action({ args: { amount: 5 } }), run())).toMatchObject({ decision: 'approval_required', rule: 'beta/review' });
  });

  it('evaluates every rule and lists every match with its effect', () => {
    expect(decide([a, b], action({ args: { amount: 500 } }), run()).matched).toEqual([
      { rule: 'alpha/ok', effect: 'allow' },
      { rule: 'alpha/check', effect: 'approval_required' },
      { rule: 'alpha/stop', effect: 'deny' },
      { rule: 'beta/review', effect: 'approval_required' },
      { rule: 'beta/block', effect: 'deny' },
    ]);
  });

  it('a deny carries no approver', () => {
    expect(decide([a], action({ args: { amount: 500 } }), run()).approver).toBeNull();
  });
});

describe('approvers (D 5.2)', () => {
  it('"by" names the approver', () => {
    const p = policy('p', 'require_approval big by "role:finance" when true');
    expect(decide([p], action(), run()).approver).toBe('role:finance');
  });

  it('without "by" the requester\'s manager approves', () => {
    const p = policy('p', 'require_approval big when true');
    expect(decide([p], action(), run('autonomous'))).toMatchObject({ decision: 'approval_required', rule: 'p/big', approver: 'role:support-lead' });
  });

  it('the approver is the winning rule\'s', () => {
    const p = policy('p', 'require_approval one by "role:first" when true\nrequire_approval two by "role:second" when true');
    expect(decide([p], action(), run()).approver).toBe('role:first');
  });
});

describe('fail-closed evaluation (D 5.1)', () => {
  it('a failing deny counts as matched and lists the error', () => {
    const p = policy('p', 'deny big when action.args.limit > 10');
    const d = decide([p], action(), run('autonomous'));
    expect(d).toMatchObject({ decision: 'deny', rule: 'p/big', matched: [{ rule: 'p/big', effect: 'deny' }] });
    expect(d.errors).toEqual([{ rule: 'p/big', message: expect.stringMatching(/limit/) }]);
  });

  it('a failing require_approval counts as matched', () => {
    const p = policy('p', 'require_approval big when action.args.amount > 10');
    const d = decide([p], action({ args: { amount: 'lots' } }), run('autonomous'));
    expect(d).toMatchObject({ decision: 'approval_required', rule: 'p/big', approver: 'role:support-lead' });
    expect(d.errors).toHaveLength(1);
  });

  it('a failing allow does not match (the default applies) and lists the error', () => {
    const p = policy('p', 'allow small when action.args.amount < 10');
    const d = decide([p], action({ args: {} }), run());
    expect(d).toMatchObject({ decision: 'approval_required', rule: 'default/sor_write', matched: [] });
    expect(d.errors).toEqual([{ rule: 'p/small', message: expect.stringMatching(/amount/) }]);
  });

  it('a dyn condition that yields a non-bool fails closed', () => {
    const p = policy('p', 'deny odd when action.args.flag\nallow fine when action.args.flag');
    const d = decide([p], action({ args: { flag: 'yes' } }), run('autonomous'));
    expect(d.decision).toBe('deny');
    expect(d.errors.map((e) => e.rule)).toEqual(['p/odd', 'p/fine']);
    expect(d.errors[0]!.message).toMatch(/not a bool/);
  });

  it('the error of a non-bool condition says what it evaluated to (D 5.1: the error is listed)', () => {
    const p = policy('p', 'deny odd when action.args.v');
    const cases: Array<[unknown, string]> = [['yes', 'a string'], [3, 'the int 3'], [null, 'null'], [[1], 'a list'], [{ a: 1 }, 'a map'], [1.5, 'a number']];
    for (const [v, what] of cases) {
      const d = decide([p], action({ args: { v } }), run('autonomous'));
      expect(d, JSON.stringify(v)).toMatchObject({ decision: 'deny', errors: [{ rule: 'p/odd', message: `condition evaluated to ${what}, not a bool` }] });
    }
  });

  // Both type-check (args are dyn) and fail closed on every decision: 180 * 1.1 parked every
  // whole-number refund for finance in a policy author's run (sweep of 2026-11-29). The error
  // names the fix (svc-policy(5) CONDITIONS); the decision is unchanged.
  it('an int in arithmetic with a double fails closed with an error that says to convert', () => {
    const p = policy('p', 'require_approval taxed by "role:finance" when action.args.amount * 1.1 > 500');
    const d = decide([p], action({ args: { amount: 180 } }), run('autonomous'));
    expect(d).toMatchObject({ decision: 'approval_required', rule: 'p/taxed', approver: 'role:finance' });
    expect(d.errors).toEqual([
      {
        rule: 'p/taxed',
        message:
          'no such overload: dyn<int> * double (an int and a double do not mix in arithmetic, and a whole number in the data is an int: convert one, as in double(action.args.amount) * 1.1)',
      },
    ]);
    const fixed = policy('p', 'require_approval taxed by "role:finance" when double(action.args.amount) * 1.1 > 500');
    expect(decide([fixed], action({ args: { amount: 180 } }), run('autonomous'))).toMatchObject({ decision: 'allow', errors: [] });
  });

  it('a number ordered against a string fails closed with an error that says how to compare', () => {
    const hint = ' (a number and a string do not compare: write the number without quotes, or convert the string with int() or double())';
    const quoted = decide([policy('p', 'deny big when action.args.amount > "100"')], action({ args: { amount: 150 } }), run('autonomous'));
    expect(quoted).toMatchObject({ decision: 'deny', errors: [{ rule: 'p/big', message: `no such overload: dyn<int> > string${hint}` }] });
    const sent = decide([policy('p', 'deny big when action.args.amount <= 0')], action({ args: { amount: '150' } }), run('autonomous'));
    expect(sent).toMatchObject({ decision: 'deny', errors: [{ rule: 'p/big', message: `no such overload: dyn<string> <= int${hint}` }] });
    // Other mismatches keep cel-js's message as it is.
    const other = decide([policy('p', 'deny big when action.args.amount + 1 > 0')], action({ args: { amount: 'x' } }), run('autonomous'));
    expect(other.errors).toEqual([{ rule: 'p/big', message: 'no such overload: dyn<string> + int' }]);
  });

  it('has() avoids the error', () => {
    const p = policy('p', 'deny big when has(action.args.limit) && action.args.limit > 10');
    expect(decide([p], action(), run('autonomous'))).toMatchObject({ decision: 'allow', rule: 'default/allow', errors: [] });
  });

  it('an action too deep to read fails every condition closed', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 200_000; i++) deep = { d: deep };
    const p = policy('p', 'allow ok when true\ndeny no when action.tool == "nothing"');
    const d = decide([p], action({ args: { deep } as Record<string, unknown> }), run('autonomous'));
    expect(d).toMatchObject({ decision: 'deny', rule: 'p/no' });
    expect(d.errors).toHaveLength(2);
    for (const e of d.errors) expect(e.message).toMatch(/^the action cannot be evaluated: ./);
  });

  it('a stored policy with a pattern that is not a regexp (accepted before posts checked it) fails closed', () => {
    const p = compilePolicy({ name: 'p', version: '1' }, 'deny bad when action.tool.matches("(")', { stored: true });
    const d = decide([p], action(), run('autonomous'));
    expect(d).toMatchObject({ decision: 'deny', rule: 'p/bad' });
    expect(d.errors).toEqual([{ rule: 'p/bad', message: expect.stringMatching(/Invalid regular expression/) }]);
  });

  it('a failing rule in one policy does not stop the others', () => {
    const p = policy('p', 'allow broken when action.args.nope == 1');
    const q = policy('q', 'allow fine when true');
    expect(decide([p, q], action(), run())).toMatchObject({ decision: 'allow', rule: 'q/fine' });
  });
});

describe('corpus cases (D 5.3)', () => {
  it('fills in defaults and refuses cases nested too deep', async () => {
    const { normalizeCorpus } = await import('../../src/policy/corpus.js');
    const [c] = normalizeCorpus([{ action: { tool: 'crm.update' } }]);
    expect(c).toEqual({
      action: { tool: 'crm.update', connector: 'crm', operation: 'update', args: {}, writes: true, system_of_record: true, summary: '' },
      run: {
        id: 'run_test', bundle: '', workflow: '', department: '', requested_by: { id: '', role: '', manager: '' }, input: {},
        usage: { tokens: 0, usd: 0 }, remit: { autonomy: 'supervised', grants: [], tools: [], scopes: [] },
      },
    });
    let deep: unknown = 1;
    for (let i = 0; i < 40; i++) deep = [deep];
    expect(() => normalizeCorpus([{ action: { tool: 'a.b', args: { deep } } }])).toThrow(/nested deeper than 32/);
  });
});

describe('what a condition can read (D 5.1)', () => {
  const yes = (cond: string, a = action(), r = run()) => decide([policy('p', `deny hit when ${cond}`)], a, r).rule === 'p/hit';

  it('run.remit.grants(x) is true only for granted classes', () => {
    expect(yes('run.remit.grants("pii")')).toBe(true);
    expect(yes('run.remit.grants("finance")')).toBe(false);
  });

  it('reads the run: department, requester, input, usage, remit', () => {
    expect(yes('run.department == "support" && run.requested_by.manager == "support-lead"')).toBe(true);
    expect(yes('run.input.tier == "gold" && run.input.count + 1 == 4')).toBe(true);
    expect(yes('run.usage.tokens > 1000 && run.usage.usd < 1.0')).toBe(true);
    expect(yes('run.remit.autonomy == "supervised" && "billing.*" in run.remit.tools && run.remit.scopes[0] == "sql:table:*"')).toBe(true);
    expect(yes('run.bundle == "refunds" && run.workflow == "refund" && run.id == "run_1"')).toBe(true);
  });

  it('reads the action; JSON integers are CEL ints and compare with doubles', () => {
    expect(yes('action.args.amount == 50 && action.args.amount > 49.5 && action.args.amount * 2 == 100')).toBe(true);
    expect(yes('action.args.amount > 100.25', action({ args: { amount: 100.5 } }))).toBe(true);
    expect(yes('action.connector == "billing" && action.operation == "refund" && action.writes && action.system_of_record')).toBe(true);
    expect(yes('action.args.lines.exists(l, l.sku == "A1")', action({ args: { lines: [{ sku: 'A1' }] } }))).toBe(true);
  });
});
