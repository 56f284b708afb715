/**
 * Policy decisions (D 5.1, 5.2) and the cost bound of a condition (src/policy/condition-cost.ts)
 * as properties. The bound is checked against what evaluation does: for random conditions of
 * nested loops (`all`, `exists`, `exists_one`, `filter`, `map`, `in`) over random lists, the
 * list elements cel-js reads while evaluating (counted through a Proxy; each read is at least
 * one node evaluated) never exceed the bound. The bound and the decision are deterministic (a
 * replay decides as the decision did, D §7), and a bound never shrinks when a list grows.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { celContext, policyEnvironment } from '../../src/policy/cel-env.js';
import { compilePolicy } from '../../src/policy/compile.js';
import { conditionCost, costOver, dataMeter } from '../../src/policy/condition-cost.js';
import { policyRun, refundAction } from '../helpers/policy-context.js';
import { decide } from '../../src/policy/decide.js';

interface Element {
  n: number;
  sub: Element[];
}

const elementOf = (depth: number): fc.Arbitrary<Element> => fc.record({ n: fc.integer({ min: 0, max: 2 }), sub: depth === 0 ? fc.constant([]) : fc.array(elementOf(depth - 1), { maxLength: 3 }) });
const element = elementOf(2);
const list = fc.array(element, { maxLength: 5 });

/** A condition over `action.args.items`, `run.input.xs` and the parts of elements, with loops nested up to three deep. */
function condition(depth: number, vars: readonly string[]): fc.Arbitrary<string> {
  const names = ['x', 'y', 'z', 'w'];
  const v = names[vars.length]!;
  const lists = ['action.args.items', 'run.input.xs', ...vars.map((u) => `${u}.sub`)];
  const made = lists.map((l) => `${l}.filter(q${vars.length}, true)`);
  const joined = fc.tuple(fc.constantFrom(...lists, ...made), fc.constantFrom(...lists, '[1, 2]', '[{"n": 1, "sub": []}]')).map(([a, b]) => `(${a} + ${b})`);
  const literal = `[${[0, 1, 2, 0, 1, 2, 0, 1].map((n) => `{"n": ${n}, "sub": []}`).join(', ')}]`;
  const source = fc.oneof(fc.constantFrom(...lists, ...made), joined, joined.map((j) => `${j}.map(m${vars.length}, m${vars.length})`), fc.constant(literal));
  const leaf = fc.oneof(fc.constant('true'), ...(vars.length > 0 ? [fc.constantFrom(...vars).map((u) => `${u}.n == 1`), fc.constantFrom(...vars).chain((a) => fc.constantFrom(...vars).map((b) => `${a}.n == ${b}.n`))] : []));
  if (depth >= 3) return leaf;
  const body = fc.constant(null).chain(() => condition(depth + 1, [...vars, v]));
  return fc.oneof(
    { weight: 1, arbitrary: leaf },
    { weight: 3, arbitrary: fc.tuple(source, fc.constantFrom('all', 'exists', 'exists_one'), body).map(([l, m, b]) => `${l}.${m}(${v}, ${b})`) },
    { weight: 1, arbitrary: fc.tuple(source, body).map(([l, b]) => `${l}.filter(${v}, ${b}).size() >= 0`) },
    { weight: 1, arbitrary: source.map((l) => `1 in ${l}.map(${v}, ${v}.n)`) },
    { weight: 1, arbitrary: joined.map((j) => `${j}.size() >= 0`) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom('[0, 1, 2, 3, 4, 5, 6, 7]', '{"0": 0, "1": 1, "2": 2, "3": 3, "4": 4, "5": 5, "6": 6, "7": 7}'), body).map(([l, b]) => `${l}.filter(${v}, ${b}).size() >= 0`) },
    { weight: 1, arbitrary: fc.tuple(source, body).map(([l, b]) => `${l}.map(${v}, ${b}).size() >= 0`) },
    { weight: 1, arbitrary: fc.tuple(fc.constant(null).chain(() => condition(depth + 1, vars)), fc.constant(null).chain(() => condition(depth + 1, vars)), fc.constantFrom('&&', '||')).map(([a, b, op]) => `(${a}) ${op} (${b})`) },
  );
}

const policyAction = (args: Record<string, unknown>) => refundAction(args, 'refund');

const runWith = (input: unknown) => policyRun({ input });

/** `v` with every list replaced by a Proxy that counts reads of its elements. */
function counted(v: unknown, counter: { reads: number }): unknown {
  if (Array.isArray(v)) {
    const inner = v.map((x) => counted(x, counter));
    return new Proxy(inner, {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) counter.reads++;
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
  }
  if (v !== null && typeof v === 'object' && Object.getPrototypeOf(v) === Object.prototype) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, counted(x, counter)]));
  return v;
}

describe('the cost bound of a condition is an upper bound of what evaluation does (D 5.1 fail closed over the budget)', () => {
  it('the list elements read while evaluating never exceed the bound for the data at hand', () => {
    fc.assert(
      fc.property(condition(0, []), list, list, (expr, items, xs) => {
        const program = policyEnvironment.parse(expr);
        const cost = conditionCost(program.ast);
        const action = policyAction({ items });
        const run = runWith({ xs });
        const bound = costOver(cost, dataMeter({ action, run }));
        const ctx = celContext(action, run) as { action: { args: unknown }; run: { input: unknown } };
        const counter = { reads: 0 };
        ctx.action.args = counted(ctx.action.args, counter);
        ctx.run.input = counted(ctx.run.input, counter);
        try {
          program(ctx);
        } catch {
          // A condition that fails (an element without `n`) read what it read before failing.
        }
        expect(counter.reads, `${expr}: ${counter.reads} reads, bound ${bound}`).toBeLessThanOrEqual(bound);
      }),
      { numRuns: 500 },
    );
  });

  it('is deterministic, and never shrinks when a list it reads grows', () => {
    fc.assert(
      fc.property(condition(0, []), list, list, element, (expr, items, xs, extra) => {
        const cost = conditionCost(policyEnvironment.parse(expr).ast);
        expect(conditionCost(policyEnvironment.parse(expr).ast)).toEqual(cost);
        const before = costOver(cost, dataMeter({ action: policyAction({ items }), run: runWith({ xs }) }));
        expect(costOver(cost, dataMeter({ action: policyAction({ items }), run: runWith({ xs }) }))).toBe(before);
        expect(costOver(cost, dataMeter({ action: policyAction({ items: [...items, extra] }), run: runWith({ xs }) }))).toBeGreaterThanOrEqual(before);
        expect(costOver(cost, dataMeter({ action: policyAction({ items }), run: runWith({ xs: [...xs, extra] }) }))).toBeGreaterThanOrEqual(before);
      }),
      { numRuns: 300 },
    );
  });
});

describe('decisions (D 5.2)', () => {
  const effect = fc.constantFrom('allow', 'deny', 'require_approval');
  const rule = fc.tuple(effect, fc.option(fc.constantFrom('role:finance', 'role:legal'), { nil: undefined }), fc.oneof(condition(1, []), fc.constantFrom('action.args.amount > 100', 'action.args.missing == 1', 'action.args.items.size() > 2', '1')));

  it('are deterministic, and the most restrictive matching effect wins, named by its first matching rule', () => {
    fc.assert(
      fc.property(fc.array(fc.array(rule, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 3 }), list, fc.integer({ min: 0, max: 200 }), (policies, items, amount) => {
        let compiled;
        try {
          compiled = policies.map((rules, p) =>
            compilePolicy({ name: `p${p}`, version: '1' }, rules.map(([e, by, cond], i) => `${e} r${i}${by && e === 'require_approval' ? ` by "${by}"` : ''}\n  when ${cond}\n`).join('')),
          );
        } catch {
          return; // a condition that does not type-check (`1`) is refused when posted: nothing to decide
        }
        const action = policyAction({ items, amount });
        const run = runWith({ xs: items });
        const d = decide(compiled, action, run);
        expect(decide(compiled, action, run)).toEqual(d);
        const rank = { allow: 0, approval_required: 1, deny: 2 } as const;
        if (d.matched.length === 0) {
          expect(d.rule).toMatch(/^default\//);
          return;
        }
        const top = Math.max(...d.matched.map((m) => rank[m.effect]));
        expect(rank[d.decision]).toBe(top);
        expect(d.rule).toBe(d.matched.find((m) => rank[m.effect] === top)!.rule);
      }),
      { numRuns: 200 },
    );
  });
});
