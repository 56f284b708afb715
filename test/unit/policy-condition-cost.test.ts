/**
 * A condition's evaluation budget (src/policy/condition-cost.ts): a condition that could take
 * longer than the budget on the action at hand is not run and fails closed, as any condition
 * that fails at decision time (D 5.1), with the reason in `errors` (D 5.2).
 */
import { describe, expect, it } from 'vitest';
import { policyEnvironment } from '../../src/policy/cel-env.js';
import { compilePolicy } from '../../src/policy/compile.js';
import { CHARS_PER_STEP, conditionCost, costOver, dataMeter, EVALUATION_BUDGET, itemsWithinBudget, sizeOf, type Factor } from '../../src/policy/condition-cost.js';
import { decide } from '../../src/policy/decide.js';
import { policyRun, refundAction } from '../helpers/policy-context.js';

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

const action = refundAction;

const run = (input: unknown = {}) => policyRun({ input });

const numbers = (n: number) => Array.from({ length: n }, (_, i) => i);

describe('the bound of a condition, from its AST', () => {
  it('does not grow with the data without a loop or an `in` over it', () => {
    const cost = conditionCost(policyEnvironment.parse('action.tool == "billing.refund" && action.args.amount > 100').ast);
    expect(cost.growsWithData).toBe(false);
    expect(costOver(cost, dataMeter({ action: { args: { amount: numbers(1000) } } }))).toBeLessThan(20);
  });

  it('is linear for one loop, quadratic for a loop over the data inside another', () => {
    expect(deepest('action.args.items.all(x, x > 0)')).toEqual(['action.args.items']);
    // `y == x` walks x, an element of the outer list, once per pair (two maps: the keys of both).
    expect(deepest('action.args.items.all(x, action.args.items.exists_one(y, y == x))')).toEqual(['action.args.items', 'action.args.items', 'action.args.items (element)']);
    // `x + y` walks an element of the outer list once per pair of inner elements (numbers here: one step).
    expect(deepest('action.args.a.all(x, run.input.b.exists(y, action.args["c"].exists(z, z == x + y)))')).toEqual(['action.args.a', 'run.input.b', 'action.args.c', 'action.args.a (element)']);
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
    expect(deepest('action.args.orders.all(o, o.lines.all(l, o.lines.exists_one(m, m == l)))')).toEqual(['action.args.orders (nested)', 'action.args.orders (nested)', 'action.args.orders (element)']);
    expect(deepest('action.args.orders.all(o, o.lines.all(l, l in o.lines))')).toEqual(['action.args.orders (nested)', 'action.args.orders (nested)', 'action.args.orders (element)']);
    const orders = [{ lines: numbers(3000) }];
    const cost = conditionCost(policyEnvironment.parse('action.args.orders.all(o, o.lines.all(l, o.lines.exists_one(m, m == l)))').ast);
    expect(costOver(cost, dataMeter({ action: { args: { orders } } }))).toBeGreaterThanOrEqual(3000 ** 2);
  });

  it('gives cel.bind\'s variable a name of its own, even when it is called run or action (review 26)', () => {
    // Bound to a path into the data, it is walked as that path.
    expect(deepest('cel.bind(run, action.args.xs, run.all(a, run.exists(b, b == a + 1)))')).toEqual(['action.args.xs', 'action.args.xs', 'action.args.xs (element)']);
    expect(deepest('cel.bind(v, action.args.xs.map(x, x), v.all(a, v.exists(b, b == a)))')).toEqual(['items', 'items', 'data']);
    // A bind of a path under another bind's path is that longer path, not the shorter one.
    expect(deepest('cel.bind(v, action.args, cel.bind(w, v.xs, w.all(a, w.exists(b, b == a))))')).toEqual(['action.args.xs', 'action.args.xs', 'action.args.xs (element)']);
  });

  it('counts a loop over a list made from the data as a level of its own', () => {
    // Each of the L lists `map` makes is the whole list: walking them all is L².
    expect(deepest('action.args.xs.map(x, action.args.xs).exists(l, l.exists(y, y == 1))')).toEqual(['items', 'items']);
    expect(deepest('cel.bind(v, action.args.xs.filter(x, x > 0), action.args.xs.all(x, v.exists(y, y == x)))')).toEqual(['action.args.xs', 'items', 'action.args.xs (element)']);
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
    // The split itself walks the summary once; the loop, as many times as it has characters.
    expect(shapes('action.summary.split(" ").exists(w, w == "refund")')).toEqual(['', 'action.summary (deep)', 'items+chars']);
    expect(shapes('action.summary.split("").all(c, action.summary.split("").exists(d, d == c))')).toEqual([
      '',
      'action.summary (deep)',
      'items+chars',
      'items+chars × action.summary (deep)', // the inner split, once per character
      'items+chars × items+chars',
      'items+chars × items+chars × items+chars', // d == c walks c, an element of a made list, per pair
    ]);
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

describe('what an operation walks of its operands (session 27)', () => {
  it('counts a list `+` inside a loop over the same list as quadratic', () => {
    // Bounded as linear before: 20,000 numbers took 4.6 s of the event loop.
    expect(shapes('action.args.items.all(x, action.args.items + [x] != [])')).toEqual(['', 'action.args.items', 'action.args.items × action.args.items (deep)', 'action.args.items × data']);
    const cost = conditionCost(policyEnvironment.parse('action.args.items.all(x, action.args.items + [x] != [])').ast);
    expect(costOver(cost, dataMeter({ action: { args: { items: numbers(20_000) } } }))).toBeGreaterThan(20_000 ** 2);
  });

  it('counts a string function by the characters it walks, once per element of the loops around it', () => {
    expect(deepest('action.args.words.exists(w, action.summary.contains(w))')).toEqual(['action.args.words', 'action.summary (deep)']);
    const cost = conditionCost(policyEnvironment.parse('action.args.words.exists(w, action.summary.contains(w))').ast);
    const words = numbers(1000).map(String);
    const bound = costOver(cost, dataMeter({ action: { args: { words }, summary: 'x'.repeat(80_000) } }));
    expect(bound).toBeGreaterThanOrEqual(1000 * (80_000 / CHARS_PER_STEP));
  });

  it('amortizes an operation on the element of the loop it is in: all of them together walk the list once', () => {
    expect(shapes('action.args.lines.exists(l, l.note.lowerAscii().contains("refund"))')).toEqual(['', 'action.args.lines', 'action.args.lines (deep)']);
    expect(shapes('action.args.orders.all(o, o.lines.all(l, l.note.contains("x")))')).toEqual(['', 'action.args.orders', 'action.args.orders (deep)', 'action.args.orders (nested)']);
    // A bind to a part of the element is that part.
    expect(shapes('action.args.lines.all(l, cel.bind(n, l.note, n.contains("x")))')).toEqual(['', 'action.args.lines', 'action.args.lines (deep)']);
  });

  it('counts an outer element walked inside an inner loop by the largest element, once per inner pair', () => {
    expect(deepest('action.args.orders.all(o, run.input.words.exists(w, o.note.contains(w)))')).toEqual(['action.args.orders', 'run.input.words', 'action.args.orders (element)']);
    const data = dataMeter({ action: { args: { orders: [{ note: 'x'.repeat(800) }, { note: 'y' }] } } });
    expect(data.at(['action', 'args', 'orders'], 'element')).toBe(1 + 800 / CHARS_PER_STEP + 4 / CHARS_PER_STEP);
  });

  it('counts a comparison by its smaller operand, and not at all against a literal', () => {
    // y is the inner loop's own element: amortized; x would be a factor of its own.
    expect(shapes('action.args.items.all(x, action.args.items.exists_one(y, y == x))')).toEqual([
      '',
      'action.args.items',
      'action.args.items × action.args.items',
      'action.args.items × action.args.items (deep)',
      'action.args.items × action.args.items (nested)', // y's entries, all of them once per x
      'action.args.items × action.args.items × action.args.items (element)', // x's entries, once per pair
    ]);
    for (const expr of [
      'action.tool == "billing.refund" && run.department != "finance"',
      'action.summary.startsWith("refund") || action.summary.endsWith("!")',
      'run.remit.grants("pii") && has(action.args.amount)',
      '["a", "b"].exists(s, s == action.tool)',
      'cel.bind(limits, [1, 2], limits.exists(l, l == action.args.amount))',
    ]) {
      expect(conditionCost(policyEnvironment.parse(expr).ast).growsWithData, expr).toBe(false);
    }
    expect(conditionCost(policyEnvironment.parse('action.summary.contains("x")').ast).growsWithData).toBe(true);
  });

  it('counts size() by a string\'s characters: a list or a map knows its size', () => {
    expect(deepest('action.args.items.all(x, x < action.args.items.size())')).toEqual(['action.args.items', 'action.args.items (chars)']);
    const data = dataMeter({ action: { args: { items: numbers(100), s: 'abcdefgh'.repeat(10) } } });
    expect(data.at(['action', 'args', 'items'], 'chars')).toBe(0);
    expect(data.at(['action', 'args', 's'], 'chars')).toBe(80 / 2); // CODE_POINTS_PER_STEP
  });

  it('fails a quadratic list `+` closed at 20,000 items, and decides a linear string check over 100,000', () => {
    const p = compilePolicy({ name: 'p', version: '1' }, 'deny odd when action.args.items.all(x, action.args.items + [x] != [])');
    const d = decide([p], action({ items: numbers(20_000) }), run());
    expect(d).toMatchObject({ decision: 'deny', rule: 'p/odd', errors: [{ rule: 'p/odd' }] });
    expect(d.errors[0]!.message).toMatch(/^not evaluated: up to/);
    const lines = numbers(100_000).map((i) => ({ note: `line ${i}` }));
    const q = compilePolicy({ name: 'q', version: '1' }, 'deny refund when action.args.lines.exists(l, l.note.lowerAscii().contains("refund"))');
    expect(decide([q], action({ lines: [...lines, { note: 'A REFUND' }] }), run())).toMatchObject({ decision: 'deny', rule: 'q/refund', errors: [] });
  });
});

describe('what `==` and `in` walk: the keys of both maps (session 27)', () => {
  // cel-js lists the keys of both maps (Object.keys) before it compares their sizes.
  const wide = Object.fromEntries(numbers(20_000).map((i) => [`k${i}`, 1]));
  const empties = numbers(20_000).map(() => ({}));

  it('fails closed on a wide map compared with each of many small ones (84 s of the event loop, bounded at 120,000 steps)', () => {
    const p = compilePolicy({ name: 'p', version: '1' }, 'deny same when action.args.ids.exists(i, i == action.args.primary)\ndeny listed when action.args.primary in action.args.ids');
    const t0 = performance.now();
    const d = decide([p], action({ ids: empties, primary: wide }), run());
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(d.errors.map((e) => e.rule)).toEqual(['p/same', 'p/listed']);
    for (const e of d.errors) expect(e.message).toMatch(/^not evaluated: up to/);
  });

  it('still decides comparisons with a short value, and `+` of parts of the element, over 10,000 lines', () => {
    const lines = numbers(10_000).map((i) => ({ sku: `SKU-${i}`, currency: 'EUR', tags: ['hw'] }));
    const p = compilePolicy(
      { name: 'p', version: '1' },
      [
        'deny currency when action.args.lines.exists(l, l.currency != action.args.currency)',
        'deny key when action.args.lines.exists(l, l.sku + ":" + l.currency == "SKU-7:USD")',
        'deny tag when action.args.lines.exists(l, !("hw" in l.tags))',
      ].join('\n'),
    );
    expect(decide([p], action({ lines, currency: 'EUR' }), run())).toMatchObject({ decision: 'approval_required', matched: [], errors: [] });
  });
});

describe('matches: run on RE2, counted by the text times the pattern\'s program (session 27)', () => {
  it('decides a pattern that backtracked exponentially on the JS RegExp at once', () => {
    // On the JS RegExp, 28 letters and a `!` took 6 s (V8's linear fallback takes no counted group).
    const p = compilePolicy({ name: 'p', version: '1' }, 'deny words when action.summary.matches("^([a-z]+ ?){1,30}$")');
    const t = performance.now();
    const d = decide([p], action({}, 'a'.repeat(28) + '!'), run());
    expect(performance.now() - t).toBeLessThan(1000);
    expect(d).toMatchObject({ decision: 'approval_required', matched: [], errors: [] });
    expect(decide([p], action({}, 'two words'), run())).toMatchObject({ decision: 'deny', rule: 'p/words', errors: [] });
  });

  it('reads \\Q…\\E as RE2 does (the JS RegExp reads the letters Q and E)', () => {
    expect(policyEnvironment.evaluate('"a.c".matches("^\\\\Qa.c\\\\E$")')).toBe(true);
    expect(policyEnvironment.evaluate('"Qa.cE".matches("^\\\\Qa.c\\\\E$")')).toBe(false);
  });

  it('counts each character of the text once per instruction of the program', () => {
    const cost = (pattern: string, summary: string) => costOver(conditionCost(policyEnvironment.parse(`action.summary.matches("${pattern}")`).ast), dataMeter({ action: { summary } }));
    const text = 'ab'.repeat(200_000);
    // 50 copies of (ab) are 250 instructions: past the budget on 400,000 characters; a plain word is not.
    expect(cost('(ab){1,50}c', text)).toBeGreaterThan(EVALUATION_BUDGET);
    expect(cost('refund', text)).toBeLessThan(EVALUATION_BUDGET);
    expect(cost('(ab){1,50}c', text)).toBeGreaterThan(20 * cost('refund', text));
    const p = compilePolicy({ name: 'p', version: '1' }, 'deny c when action.summary.matches("(ab){1,50}c")');
    expect(decide([p], action({}, text), run()).errors[0]?.message).toMatch(/^not evaluated: up to/);
  });

  // Review of session 27: re2js took 44 ns a character and instruction here, not 15 (0.5 step):
  // 7,400 characters ran 0.87 s at a bound of 9.5 million, under the budget.
  it('bounds the slowest measured RE2 match at no less than 30 ns a step', () => {
    const pattern = '(?:(?:.*a){30}){30}$';
    const summary = 'ab '.repeat(2_466);
    const bound = costOver(conditionCost(policyEnvironment.parse(`action.summary.matches("${pattern}")`).ast), dataMeter({ action: { summary } }));
    const measuredNs = summary.length * 2_703 * 44; // 2,703 instructions
    expect(bound * 30).toBeGreaterThanOrEqual(measuredNs);
    expect(bound).toBeGreaterThan(EVALUATION_BUDGET);
  });

  it('sizes a stored policy\'s pattern from the data by its characters, each up to 1,000 instructions', () => {
    const cost = conditionCost(policyEnvironment.parse('action.summary.matches(action.args.p)').ast);
    expect(shapes('action.summary.matches(action.args.p)')).toContain('action.summary (deep) × action.args.p (deep)');
    expect(costOver(cost, dataMeter({ action: { summary: 'x'.repeat(10_000), args: { p: '(.*a){20}$' } } }))).toBeGreaterThan(EVALUATION_BUDGET);
  });

  // Found by test/unit/policy-properties.test.ts (twice): the body of a loop over a literal
  // list was counted once, however many elements the list has (up to 256).
  it('runs the body of a loop over a literal list once per element, and counts `in` a literal list as its walk', () => {
    const data = dataMeter({ action: { args: {} }, run: { input: { xs: [{ n: 0 }, { n: 0 }] } } });
    const bound = (expr: string) => costOver(conditionCost(policyEnvironment.parse(expr).ast), data);
    expect(bound('[0, 1, 2, 3, 4, 5, 6, 7].all(a, run.input.xs.all(x, true))')).toBeGreaterThanOrEqual(8 * 2);
    expect(bound('run.input.xs.all(x, x.n in [0, 1, 2, 3, 4, 5, 6, 7])')).toBeGreaterThanOrEqual(2 * 8);
    expect(bound('[1, 2].all(a, [1, 2, 3, 4].all(b, run.input.xs.all(x, true)))')).toBeGreaterThanOrEqual(2 * 4 * 2);
    const codes = numbers(200).join(', ');
    const p = compilePolicy({ name: 'p', version: '1' }, `deny counted when [${codes}].all(c, action.args.items.filter(x, x == c).size() >= 0)`);
    expect(decide([p], action({ items: numbers(200_000) }), run()).errors[0]?.message).toMatch(/^not evaluated/); // 5 s before
    expect(decide([p], action({ items: numbers(1000) }), run())).toMatchObject({ decision: 'deny', errors: [] });
  });

  it('walks a bind to a case-mapped path as the path: a check of each line against it stays linear (review 27)', () => {
    const p = compilePolicy({ name: 'p', version: '1' }, 'deny mixed when !cel.bind(cur, action.args.currency.upperAscii(), action.args.lines.all(l, l.currency.upperAscii() == cur))');
    const lines = numbers(10_000).map((i) => ({ sku: `sku-${i}`, currency: 'eur', amount: i }));
    expect(decide([p], action({ currency: 'EUR', lines }), run())).toMatchObject({ decision: 'approval_required', errors: [] });
    expect(decide([p], action({ currency: 'EUR', lines: [...lines, { currency: 'usd' }] }), run())).toMatchObject({ decision: 'deny', rule: 'p/mixed', errors: [] });
  });

  it('takes size() of a list the condition makes as a step: filtering each order\'s lines stays linear', () => {
    const p = compilePolicy({ name: 'p', version: '1' }, 'deny many when action.args.orders.exists(o, o.lines.filter(l, l.refund).size() > 3)');
    const orders = numbers(10_000).map((i) => ({ id: `o${i}`, lines: [{ refund: false }, { refund: i === 9_999 }] }));
    expect(decide([p], action({ orders }), run())).toMatchObject({ decision: 'approval_required', errors: [] });
    expect(shapes('action.args.orders.exists(o, o.lines.filter(l, l.refund).size() > 3)')).toEqual(['', 'action.args.orders', 'action.args.orders (nested)']);
  });

  it('counts size() of a string by its code points, 2 a step (cel-js walks them: about 8 ns each)', () => {
    const data = dataMeter({ action: { args: { s: 'x'.repeat(1000) } } });
    expect(data.at(['action', 'args', 's'], 'chars')).toBe(500);
  });
});

describe('how many items a condition can take (what svc policy lint notes)', () => {
  // Every list n items long, each element one step (as lint assumes).
  const uniform = (n: number) => ({ items: n, chars: 0, at: (_path: readonly string[], size: string) => (size === 'element' ? 1 : n) });
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
