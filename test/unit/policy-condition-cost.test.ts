/**
 * A condition's evaluation budget (src/policy/condition-cost.ts): a condition that could take
 * longer than the budget on the action at hand is not run and fails closed, as any condition
 * that fails at decision time (D 5.1), with the reason in `errors` (D 5.2).
 */
import { describe, expect, it } from 'vitest';
import { policyEnvironment } from '../../src/policy/cel-env.js';
import { compilePolicy } from '../../src/policy/compile.js';
import { conditionCost, costOver, dataMeter, EVALUATION_BUDGET, itemsWithinBudget, sizeOf, type Factor } from '../../src/policy/condition-cost.js';
import { toPolicyAction, toPolicyRun } from '../../src/policy/corpus.js';
import { decide } from '../../src/policy/decide.js';
import type { PolicyAction, PolicyRunContext } from '../../src/types.js';

const named = (f: Factor) => (typeof f === 'string' ? f : f.path.join('.') + (f.size === 'length' ? '' : ` (${f.size})`));

/** Every term's factors, named, one string per term, sorted. */
function shapes(expr: string): string[] {
  return conditionCost(policyEnvironment.parse(expr).ast).terms.map((t) => t.factors.map(named).join(' × ')).sort();
}

/** The sizes the deepest nodes of a condition are multiplied by, outermost loop first. */
function deepest(expr: string): string[] {
  const { terms } = conditionCost(policyEnvironment.parse(expr).ast);
  const depth = Math.max(...terms.map((t) => t.factors.length));
  return terms.find((t) => t.factors.length === depth)!.factors.map(named);
}

function action(args: Record<string, unknown>, summary = ''): PolicyAction {
  return toPolicyAction({ tool: 'billing.refund', args, writes: true, system_of_record: true, summary });
}

function run(input: unknown = {}): PolicyRunContext {
  return toPolicyRun({
    id: 'run_1',
    bundle: 'refunds',
    workflow: 'refund',
    department: 'support',
    requested_by: { id: 'ana', role: 'agent', manager: 'support-lead' },
    input,
    usage: { tokens: 0, usd: 0 },
    remit: { autonomy: 'supervised', grants: [], tools: ['billing.*'], scopes: [] },
  });
}

const numbers = (n: number) => Array.from({ length: n }, (_, i) => i);

describe('the bound of a condition, from its AST', () => {
  it('does not grow with the data without a loop or an `in` over it', () => {
    const cost = conditionCost(policyEnvironment.parse('action.tool == "billing.refund" && action.args.amount > 100').ast);
    expect(cost.growsWithData).toBe(false);
    expect(costOver(cost, dataMeter({ action: { args: { amount: numbers(1000) } } }))).toBeLessThan(20);
  });

  it('is linear for one loop, quadratic for a loop over the data inside another', () => {
    expect(deepest('action.args.items.all(x, x > 0)')).toEqual(['action.args.items']);
    expect(deepest('action.args.items.all(x, action.args.items.exists_one(y, y == x))')).toEqual(['action.args.items', 'action.args.items']);
    expect(deepest('action.args.a.all(x, run.input.b.exists(y, action.args["c"].exists(z, z == x + y)))')).toEqual(['action.args.a', 'run.input.b', 'action.args.c']);
  });

  it('counts a loop over a part of the element an outer loop is at as no new level', () => {
    expect(shapes('action.args.orders.all(o, o.lines.all(l, l.taxes.exists(t, t > 0)))')).toEqual(['', 'action.args.orders', 'action.args.orders (nested)']);
    expect(shapes('action.args.rows.all(r, r[0].exists(c, c == 1))')).toEqual(['', 'action.args.rows', 'action.args.rows (nested)']);
    // A literal index is a step of the path like a name; a computed one is not.
    expect(deepest('action.args.rows[0].exists(c, c == 1)')).toEqual(['action.args.rows.0']);
    // A variable named like a root is the loop's, not the data's.
    expect(shapes('action.args.xs.all(action, action.exists(y, y == 1))')).toEqual(['', 'action.args.xs', 'action.args.xs (nested)']);
  });

  it('counts a part of an outer loop\'s element, walked inside an inner loop, as a level of its own (review 26)', () => {
    // No duplicate line in an order: quadratic in the lines.
    expect(deepest('action.args.orders.all(o, o.lines.all(l, o.lines.exists_one(m, m == l)))')).toEqual(['action.args.orders (nested)', 'action.args.orders (nested)']);
    expect(deepest('action.args.orders.all(o, o.lines.all(l, l in o.lines))')).toEqual(['action.args.orders (nested)', 'action.args.orders (nested)']);
    const orders = [{ lines: numbers(3000) }];
    const cost = conditionCost(policyEnvironment.parse('action.args.orders.all(o, o.lines.all(l, o.lines.exists_one(m, m == l)))').ast);
    expect(costOver(cost, dataMeter({ action: { args: { orders } } }))).toBeGreaterThanOrEqual(3000 ** 2);
  });

  it('gives cel.bind\'s variable a name of its own, even when it is called run or action (review 26)', () => {
    expect(deepest('cel.bind(run, action.args.xs, run.all(a, run.exists(b, b == a + 1)))')).toEqual(['items', 'items']);
  });

  it('counts a loop over a list made from the data as a level of its own', () => {
    // Each of the L lists `map` makes is the whole list: walking them all is L².
    expect(deepest('action.args.xs.map(x, action.args.xs).exists(l, l.exists(y, y == 1))')).toEqual(['items', 'items']);
    expect(deepest('cel.bind(v, action.args.xs, action.args.xs.all(x, v.exists(y, y == x)))')).toEqual(['action.args.xs', 'items']);
    // An index the condition computes: sized by all the data.
    expect(deepest('action.args.m[action.args.k].exists(y, y == 1)')).toEqual(['items']);
  });

  it('leaves a loop over a literal list at the level it is written at', () => {
    expect(conditionCost(policyEnvironment.parse('[1, 2, 3].exists(n, n == action.args.amount)').ast).growsWithData).toBe(false);
    expect(deepest('action.args.items.all(i, ["a", "b"].exists(s, s == i))')).toEqual(['action.args.items']);
  });

  it('counts `in` as a walk through its list, unless the list is literal or a part of the element', () => {
    expect(deepest('"x" in action.args.tags')).toEqual(['action.args.tags (member)']);
    expect(deepest('action.args.ids.all(i, i in run.input.allowed)')).toEqual(['action.args.ids', 'run.input.allowed (member)']);
    expect(deepest('action.args.ids.all(i, i in ["a", "b"])')).toEqual(['action.args.ids']);
    expect(shapes('action.args.users.all(u, "admin" in u.roles)')).toEqual(['', 'action.args.users', 'action.args.users (nested)']);
  });

  it('sizes a loop over `split` by the characters, not the items', () => {
    expect(deepest('action.summary.split(" ").exists(w, w == "refund")')).toEqual(['items+chars']);
    expect(deepest('action.summary.split("").all(c, action.summary.split("").exists(d, d == c))')).toEqual(['items+chars', 'items+chars']);
  });

  it('measures list items, map entries (with their keys) and characters, in all and under a path', () => {
    expect(sizeOf([{ ab: [1, 'xyz', { c: null }] }])).toEqual({ items: 1 + 3 + 1, chars: 2 + 3 + 1 });
    expect(sizeOf(['hello', [], {}])).toEqual({ items: 0, chars: 5 });
    const data = dataMeter({ action: { args: { items: [[1, 2], [3]], k: 'v' } }, run: {} });
    expect(data.items).toBe(1 + 2 + 2 + 2 + 1);
    expect(data.at(['action', 'args', 'items'], 'nested')).toBe(2 + 2 + 1);
    expect(data.at(['action', 'args', 'items'], 'length')).toBe(2);
    expect(data.at(['action', 'args', 'items', '0'], 'length')).toBe(2);
    expect(data.at(['action', 'args', 'missing', 'x'], 'nested')).toBe(0);
    expect(data.at(['action', 'args', 'constructor'], 'length')).toBe(0);
    // `in` walks a list and looks a map up.
    expect(data.at(['action', 'args', 'items'], 'member')).toBe(2);
    expect(data.at(['action', 'args'], 'member')).toBe(0);
    expect(data.at(['action', 'args'], 'length')).toBe(2);
  });
});

describe('how many items a condition can take (what svc policy lint notes)', () => {
  const uniform = (n: number) => ({ items: n, chars: 0, at: () => n });
  it('is the largest count within the budget, for every shape', () => {
    for (const expr of ['action.args.items.all(x, action.args.items.exists_one(y, y == x))', 'action.args.a.all(x, action.args.b.exists(y, action.args.c.exists(z, z == x)))', 'action.args.items.all(x, x > 0)']) {
      const cost = conditionCost(policyEnvironment.parse(expr).ast);
      const n = itemsWithinBudget(cost);
      expect(costOver(cost, uniform(n)), expr).toBeLessThanOrEqual(EVALUATION_BUDGET);
      expect(costOver(cost, uniform(n + 1)), expr).toBeGreaterThan(EVALUATION_BUDGET);
    }
  });
});

describe('a decision over the budget (D 5.1 fails closed, D 5.2 errors)', () => {
  const quadratic = 'action.args.items.all(x, action.args.items.exists_one(y, y == x))';

  it('does not run a deny rule quadratic in 3,000 items: it matches, with the reason', () => {
    const p = compilePolicy({ name: 'p', version: '1' }, `deny dup when !(${quadratic})`);
    const d = decide([p], action({ items: numbers(3000) }), run());
    expect(d).toMatchObject({ decision: 'deny', rule: 'p/dup', matched: [{ rule: 'p/dup', effect: 'deny' }] });
    expect(d.errors).toHaveLength(1);
    expect(d.errors[0]!.rule).toBe('p/dup');
    const message = d.errors[0]!.message;
    expect(message).toMatch(/^not evaluated: up to [\d,]+ steps over this action and run, over the budget of 10,000,000 /);
    // At least a step for each of the 3,001² pairs of items (3,000 and the map entry).
    expect(Number(/up to ([\d,]+)/.exec(message)![1]!.replaceAll(',', ''))).toBeGreaterThanOrEqual(3001 ** 2);
  });

  it('does not count an allow rule over the budget as matched', () => {
    const p = compilePolicy({ name: 'p', version: '1' }, `allow unique when ${quadratic}`);
    const d = decide([p], action({ items: numbers(3000) }), run());
    expect(d).toMatchObject({ decision: 'approval_required', rule: 'default/sor_write', matched: [] });
    expect(d.errors[0]!.message).toMatch(/^not evaluated/);
  });

  it('runs the same rule over a list it can afford, and a linear rule over a long one', () => {
    const p = compilePolicy(
      { name: 'p', version: '1' },
      [`deny dup when !(${quadratic})`, 'deny negative when action.args.items.exists(x, x < 0)', 'deny listed when run.input.blocked.exists(b, b == action.args.who)'].join('\n'),
    );
    expect(decide([p], action({ items: numbers(300), who: 'ana' }), run({ blocked: ['bob'] }))).toMatchObject({ decision: 'approval_required', matched: [], errors: [] });
    expect(decide([p], action({ items: [...numbers(300), 5], who: 'ana' }), run({ blocked: ['bob'] }))).toMatchObject({ decision: 'deny', rule: 'p/dup', errors: [] });
    const long = { action: { args: { items: numbers(200_000) } } };
    expect(costOver(p.rules[1]!.cost, dataMeter(long))).toBeLessThan(EVALUATION_BUDGET);
    expect(decide([p], action({ items: [-1], who: 'ana' }), run({ blocked: numbers(50_000).map(String) }))).toMatchObject({ decision: 'deny', rule: 'p/negative', errors: [] });
  });

  it('looks a map up in one step: an id checked against a run\'s allow-map is linear (review 26)', () => {
    const p = compilePolicy({ name: 'p', version: '1' }, 'deny unknown when action.args.ids.exists(i, !(i in run.input.allowed))');
    const ids = numbers(5000).map((i) => `id${i}`);
    const d = decide([p], action({ ids }), run({ allowed: Object.fromEntries(ids.map((i) => [i, true])) }));
    expect(d).toMatchObject({ decision: 'approval_required', matched: [], errors: [] });
  });

  it('sizes an outer loop by its list\'s length, not by every field of its elements (review 26)', () => {
    const p = compilePolicy({ name: 'p', version: '1' }, 'deny blocked when action.args.orders.exists(o, run.input.blocked.exists(b, b == o.f0))');
    const orders = numbers(2000).map((i) => Object.fromEntries(numbers(10).map((f) => [`f${f}`, `${i}-${f}`])));
    const d = decide([p], action({ orders }), run({ blocked: numbers(500).map((b) => `x${b}`) }));
    expect(d).toMatchObject({ decision: 'approval_required', matched: [], errors: [] });
  });

  it('counts the run input as data a condition reads', () => {
    const p = compilePolicy({ name: 'p', version: '1' }, 'deny unknown when action.args.ids.exists(i, !(i in run.input.allowed))');
    const allowed = numbers(5000).map((i) => `id${i}`);
    const d = decide([p], action({ ids: allowed }), run({ allowed }));
    expect(d).toMatchObject({ decision: 'deny', rule: 'p/unknown' });
    expect(d.errors[0]!.message).toMatch(/^not evaluated/);
  });
});
