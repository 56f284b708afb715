/**
 * What one condition can cost, known before it runs. cel-js bounds a condition's size (2,000
 * nodes) but not the time it takes: comprehensions nest, over lists a worker sends, so a
 * condition quadratic in `action.args.items` held the kernel's event loop, and every other
 * request, for as long as it ran (3,000 items: 5 s; 200,000 in a 1 MiB proposal: hours).
 *
 * Each rule therefore carries, from its AST, a bound on the nodes it evaluates: a sum of node
 * counts, each times the sizes of the loops it sits in. A loop over a path the condition names
 * (`action.args.items`) is sized by what is there (its list items and map entries, nested
 * ones included); a loop over a list the condition makes, by all the data (L), or by all the
 * data and its characters (T) when `split` made it. A decision works the bound out for the
 * action at hand and does not run a condition over `EVALUATION_BUDGET`: it fails closed like
 * any condition that fails at decision time (decisions 5.1), with the reason in the decision's
 * `errors`. Deterministic, so a replay decides as the decision did.
 *
 * A loop over a part of the element the innermost loop is at (`items.all(i, i.tags.exists(...))`)
 * is not a new level: the parts of distinct elements are distinct, so all of them together are
 * at most everything nested under the outer list. A part of an outer loop's element, walked
 * inside an inner loop, is (`o.lines.all(l, o.lines.exists_one(m, m == l))` is quadratic in
 * lines). `x in map` is a lookup, `x in list` a walk. Literal lists are bounded by the policy
 * itself.
 *
 * An operation linear in its operands (`+`, a comparison of two values from the data, a string
 * function, a conversion) counts, besides its node, the size of each operand that is not a
 * literal: everything nested under it, its characters at `CHARS_PER_STEP` a step. Without that,
 * `items.all(x, items + [x] != [])` was bounded as linear and ran quadratic (20,000 numbers:
 * 4.6 s). An operand that is a part of the innermost loop's element is amortized like a loop
 * over one. A comparison with a literal stops at the literal's length, `startsWith` and
 * `endsWith` of a literal too; `has`, `grants` and a timestamp's fields take one step.
 *
 * `==` and `!=` also walk the items and entries of both operands, and `x in list` those of x
 * once per item and of the list once: cel-js lists the keys of two maps (Object.keys) before
 * it compares their sizes, so a 20,000-key map compared with 20,000 empty ones took 84 s
 * while bounded at 120,000 steps (session 27). An operand written in the condition with no
 * map in it needs none of that. The part of an outer loop's element an operation names
 * (`o.note`) is sized by the largest such part, not the largest element. `a + b` is walked as
 * `a` and `b` are. `matches` runs on RE2 (re2-matches.ts): each character of its text once
 * per instruction of the pattern's program. A loop over a literal list adds no factor (the
 * policy bounds it) but runs its body once per element (a property test found it counted
 * once).
 */

import { CEL_LIMITS } from './cel-env.js';
import { CHARS_PER_STEP, type DataMeter, type PathSize } from './data-meter.js';
import { re2Instructions } from './re2-matches.js';

export { CHARS_PER_STEP, dataMeter, sizeOf, type DataMeter, type PathSize } from './data-meter.js';

/** Node evaluations one condition may take on one action (about 0.3 s here). */
export const EVALUATION_BUDGET = 10_000_000;

/**
 * Steps per character and program instruction of an RE2 match: re2js takes up to about 44 ns
 * (`(?:(?:.*a){30}){30}$` on `ab ab …`; 14 ns was measured on `(.*a){1000}$` alone).
 */
export const STEPS_PER_CHARACTER_INSTRUCTION = 2;
/** What a `matches` call costs besides its text: the cached program's lookup and a matcher. */
const MATCHES_CALL_STEPS = 20;
/** The largest count RE2 takes in a repetition: a pattern's character is at most that many instructions. */
const RE2_MAX_REPEAT = 1000;

/** The most elements a list or map written in a condition has. */
const MAX_LITERAL_ELEMENTS = Math.max(CEL_LIMITS.maxListElements, CEL_LIMITS.maxMapEntries);

/**
 * What one loop level is sized by: a path into the data and how (`PathSize`, data-meter.ts),
 * or all of it (L, `items`; T with the characters, `items+chars`; `data`, all of it sized as
 * an operation walks it). `within`, for `element`: the part of each element an operation
 * walks (`o.note` of `orders.all(o, …)`), its path from the element.
 */
export type Factor = { path: readonly string[]; size: PathSize; within?: readonly string[] } | 'items' | 'items+chars' | 'data';

/** A condition's bound: each term's nodes run once per combination of its factors' elements. */
export interface ConditionCost {
  readonly terms: ReadonlyArray<{ readonly factors: readonly Factor[]; readonly nodes: number }>;
  /** True when the bound depends on the data at all (a loop or an `in` over data): read per decision. */
  readonly growsWithData: boolean;
}

const LOOP_MACROS = new Set(['all', 'exists', 'exists_one', 'map', 'filter']);
/** Operators as long as their smaller operand (not at all, with a literal). */
const COMPARISONS = new Set(['==', '!=', '<', '<=', '>', '>=']);
/** Functions that take one step whatever their operands (a lookup, a field of a timestamp). */
const ONE_STEP_CALLS = new Set([
  'has',
  'grants',
  'dyn',
  'type',
  'getFullYear',
  'getMonth',
  'getDate',
  'getDayOfMonth',
  'getDayOfWeek',
  'getDayOfYear',
  'getHours',
  'getMinutes',
  'getSeconds',
  'getMilliseconds',
]);
/** Functions that stop at the length of their argument: a literal one bounds them. */
const PREFIX_CALLS = new Set(['startsWith', 'endsWith']);
/** Functions whose result is no larger than their operand (a constant factor for case mapping). */
const SIZE_KEEPING_CALLS = new Set(['lowerAscii', 'upperAscii', 'trim', 'substring', 'charAt', 'string', 'dyn']);
const PATH_OPS = new Set(['.', '.?', '[]', '[?]']);
/** The variables a condition is given: paths from them are the data the decision reads. */
const DATA_ROOTS = new Set(['action', 'run']);

interface Node {
  op: string;
  args: unknown;
}

const isNode = (v: unknown): v is Node => typeof v === 'object' && v !== null && typeof (v as Node).op === 'string';

/** A value written in the condition: its size is the policy's, not the data's. */
function isLiteral(node: unknown): boolean {
  if (!isNode(node)) return false;
  if (node.op === 'value') return true;
  if (node.op === 'list') return Array.isArray(node.args) && node.args.every(isLiteral);
  if (node.op === 'map') return Array.isArray(node.args) && node.args.every((entry) => Array.isArray(entry) && entry.every(isLiteral));
  return false;
}

/** How an operation walks an operand: all of it (`deep`), a string's characters, or its items and entries. */
type Walk = 'deep' | 'chars' | 'nested';

/** What `==` walks of all the elements of a loop with this factor together: their items and entries. */
function nestedOf(f: Factor): Factor {
  if (typeof f !== 'string') return { path: f.path, size: 'nested' };
  return f === 'items' ? 'data' : f;
}

/** What operations on all the elements of a loop with this factor walk together. */
function deepOf(f: Factor): Factor {
  if (typeof f !== 'string') return { path: f.path, size: 'deep' };
  return f === 'items' ? 'data' : f;
}

/**
 * What an operation on any one element of a loop with this factor walks: the largest one, or
 * the largest of its parts at `within` when the loop walks the list at the path itself.
 */
function elementOf(f: Factor, within: readonly string[] | null = null): Factor {
  if (typeof f !== 'string') return within !== null && within.length > 0 && f.size === 'length' ? { path: f.path, size: 'element', within } : { path: f.path, size: 'element' };
  return f === 'items' ? 'data' : f;
}

/**
 * A variable in scope (a loop's, or `cel.bind`'s). `rooted`: it walks elements of the data
 * itself, each a part of `whole` (what bounds all its elements' parts together); `depth`: the
 * number of loops around the body it is bound in; `level`, the body's level, and `slot`, the
 * factor there its loop added or grew (null for a loop over a literal list, and a bind);
 * `constant`: its value is written in the condition; `alias`: the path into the data a bind
 * names (`cel.bind(xs, action.args.xs, …)`), walked as that path is.
 */
interface Bound {
  rooted: boolean;
  depth: number;
  whole: Factor | null;
  level: readonly Factor[];
  slot: number | null;
  constant: boolean;
  /** Its value is written in the condition with no map in it: `==` never compares two maps there. */
  scalar: boolean;
  alias: readonly string[] | null;
}
type Scope = ReadonlyMap<string, Bound>;

/** What a loop (or an `in`) walks. */
type Range =
  | { kind: 'part'; innermost: boolean; whole: Factor | null } // a part of an element of a loop over the data
  | { kind: 'literal' } // a list written in the condition
  | { kind: 'data'; path: readonly string[] | null } // the data; its path when every step is a name
  | { kind: 'made'; factor: Factor }; // a list the condition makes

/** The cost bound of a parsed condition (`program.ast`). */
export function conditionCost(ast: unknown): ConditionCost {
  const counts = new Map<string, { factors: Factor[]; nodes: number }>();
  // How many times the node being walked runs per combination of its level's factors: a loop
  // over a literal list adds no factor (the policy bounds it) but runs its body per element.
  let times = 1;
  const count = (level: readonly Factor[], steps = 1): void => {
    const key = JSON.stringify(level);
    const term = counts.get(key) ?? { factors: [...level], nodes: 0 };
    term.nodes += steps * times;
    counts.set(key, term);
  };

  /** The elements of a literal list (or map) a loop or `in` walks: a bound name's, at most CEL's 256. */
  const literalLength = (node: unknown): number =>
    isNode(node) && (node.op === 'list' || node.op === 'map') && Array.isArray(node.args) ? Math.max(1, node.args.length) : MAX_LITERAL_ELEMENTS;

  const rangeOf = (node: unknown, scope: Scope, depth: number): Range => {
    if (isNode(node) && (node.op === 'list' || node.op === 'map')) return { kind: 'literal' };
    const { root, steps } = pathOf(node);
    if (root !== null) {
      const bound = scope.get(root);
      if (bound?.rooted) return { kind: 'part', innermost: bound.depth === depth, whole: bound.whole };
      if (bound?.alias) return { kind: 'data', path: steps ? [...bound.alias, ...steps] : null };
      if (bound?.constant) return { kind: 'literal' };
      if (!bound && DATA_ROOTS.has(root)) return { kind: 'data', path: steps ? [root, ...steps] : null };
    }
    return { kind: 'made', factor: mentionsSplit(node) ? 'items+chars' : 'items' };
  };

  /**
   * The level a loop's body runs at (`member`: an `in`'s walk), whether its elements are data,
   * and what bounds all their parts together. A loop over a part of the element the innermost
   * loop is at adds no factor: over all that loop's elements, their parts are distinct, so
   * together they are at most everything nested under what it walks (its factor becomes
   * `nested`). A part of an outer loop's element is walked again for every element of the loops
   * inside it: a factor of its own.
   */
  const inner = (range: Range, level: readonly Factor[], member = false): { level: readonly Factor[]; rooted: boolean; whole: Factor | null } => {
    switch (range.kind) {
      case 'part': {
        if (!range.innermost) return { level: [...level, range.whole ?? 'items'], rooted: true, whole: range.whole };
        const last = level.at(-1);
        const nested = last !== undefined && typeof last !== 'string' ? { path: last.path, size: 'nested' as const } : last;
        return { level: nested === undefined ? [...level] : [...level.slice(0, -1), nested], rooted: true, whole: range.whole };
      }
      case 'literal':
        return { level, rooted: false, whole: null };
      case 'data': {
        const whole: Factor = range.path ? { path: range.path, size: 'nested' } : 'items';
        const factor: Factor = range.path ? { path: range.path, size: member ? 'member' : 'length' } : 'items';
        return { level: [...level, factor], rooted: true, whole };
      }
      case 'made':
        return { level: [...level, range.factor], rooted: false, whole: null };
    }
  };

  /** A value written in the condition, or a part of a variable bound to one. */
  const isConstant = (node: unknown, scope: Scope): boolean => {
    if (isLiteral(node)) return true;
    const root = pathOf(node).root;
    return root !== null && scope.get(root)?.constant === true;
  };

  /**
   * The level at which an operation walks one operand: one more factor, its size. For (a part
   * of) the element of the loop whose body this is, that loop's factor grown to everything
   * under its list instead: the elements are distinct, so all the walks together are at most
   * that. An element of an outer loop is walked again for each element of the loops inside:
   * a factor of its own. Null for a literal, bounded by the policy.
   */
  const operandLevel = (node: unknown, level: readonly Factor[], scope: Scope, depth: number, walks: Walk = 'deep'): readonly Factor[] | null => {
    if (isConstant(node, scope)) return null;
    const kept = sizeKeptFrom(node);
    if (kept !== node) return operandLevel(kept, level, scope, depth, walks === 'nested' ? walks : 'deep');
    const root = pathOf(node).root;
    const bound = root === null ? undefined : scope.get(root);
    if (bound && bound.slot !== null) {
      const slot = bound.slot;
      if (bound.level === level) return level.map((f, i) => (i === slot ? (walks === 'nested' ? nestedOf(f) : deepOf(f)) : f));
      return [...level, elementOf(bound.level[slot]!, pathOf(node).steps)];
    }
    const range = rangeOf(node, scope, depth);
    if (range.kind === 'data') return [...level, range.path ? { path: range.path, size: walks } : 'data'];
    // A value the condition makes (a list around values from the data, a bind's value).
    return [...level, mentionsSplit(node) ? 'items+chars' : 'data'];
  };

  /**
   * The levels at which an operation walks one operand: `a + b` is no larger than its
   * operands together, so it is walked as they are (`l.sku + ":" + l.currency` is parts of
   * the element, not a value sized by all the data).
   */
  const operandLevels = (node: unknown, level: readonly Factor[], scope: Scope, depth: number, walks: Walk = 'deep'): Array<readonly Factor[]> => {
    if (isNode(node) && node.op === '+' && Array.isArray(node.args)) return node.args.flatMap((a) => operandLevels(a, level, scope, depth, walks));
    const at = operandLevel(node, level, scope, depth, walks);
    return at ? [at] : [];
  };

  /** Counts what a linear operation walks of its operands, besides its own node. */
  const countOperands = (operands: readonly unknown[], level: readonly Factor[], scope: Scope, depth: number, walks: Walk = 'deep'): void => {
    for (const operand of operands) for (const at of operandLevels(operand, level, scope, depth, walks)) count(at);
  };

  /**
   * A comparison stops at the end of the smaller operand (lengths first, then element by
   * element), so it counts the operand with the smaller bound: the one with fewer factors.
   */
  const countComparison = (op: string, operands: readonly unknown[], level: readonly Factor[], scope: Scope, depth: number): void => {
    const levels = operands.map((o) => (isConstant(o, scope) ? null : operandLevels(o, level, scope, depth)));
    const deepest = (ls: Array<readonly Factor[]>) => Math.max(0, ...ls.map((l) => l.length));
    if (levels.every((l) => l !== null)) for (const at of levels.reduce((a, b) => (deepest(b!) < deepest(a!) ? b : a))!) count(at);
    // Two maps are equal only after cel-js has listed the keys of both (Object.keys), whatever
    // their sizes: `==` and `!=` walk the entries of each operand, unless the other is
    // written in the condition with no map in it (a map is unequal to anything else at once).
    if (op !== '==' && op !== '!=') return;
    const scalar = (n: unknown) => (isLiteral(n) && !mentionsOp(n, 'map')) || (isNode(n) && n.op === 'id' && typeof n.args === 'string' && scope.get(n.args)?.scalar === true);
    operands.forEach((o, i) => {
      if (scalar(operands[1 - i])) return;
      for (const at of operandLevels(o, level, scope, depth, 'nested')) count(at);
    });
  };

  /**
   * `x in list` compares x with each element as `==` does (the entries of both, when both are
   * maps): it walks what is nested under the list's items once, and x once per item. A map is
   * looked up (`compared` and `member` are 0 there).
   */
  const countMembership = (x: unknown, list: unknown, range: Range, level: readonly Factor[], scan: readonly Factor[], scope: Scope, depth: number): void => {
    const items = range.kind === 'data' && range.path ? [...level, { path: range.path, size: 'compared' as const }] : operandLevel(list, level, scope, depth, 'nested');
    if (items) count(items);
    if (range.kind === 'part') {
      // Each element's own list: x, walked per item, is an element of an outer loop there.
      for (const at of operandLevels(x, [...scan], scope, depth, 'nested')) count(at);
      return;
    }
    for (const at of operandLevels(x, level, scope, depth, 'nested')) count([...at, scan.at(-1)!]);
  };

  /**
   * `text.matches(pattern)` runs RE2 (src/policy/re2-matches.ts): each character of the text
   * once per instruction of the pattern's program at most, two steps each, and a
   * call's own setup. A pattern from the data (only a stored policy has one: a new policy's
   * pattern is written in it) is sized by its characters, each up to 1,000 instructions (RE2's
   * largest count).
   */
  const countMatches = (text: unknown, pattern: unknown, level: readonly Factor[], scope: Scope, depth: number): void => {
    count(level, MATCHES_CALL_STEPS);
    const written = isNode(pattern) && pattern.op === 'value' && typeof pattern.args === 'string' ? re2Instructions(pattern.args) : null;
    for (const at of operandLevels(text, level, scope, depth)) {
      if (written !== null) {
        count(at, written * STEPS_PER_CHARACTER_INSTRUCTION * CHARS_PER_STEP);
        continue;
      }
      const patterns = operandLevels(pattern, at, scope, depth);
      if (patterns.length === 0) count(at, RE2_MAX_REPEAT * STEPS_PER_CHARACTER_INSTRUCTION * CHARS_PER_STEP * 64); // a bound name: its literal is up to 64 characters here
      for (const both of patterns) count(both, RE2_MAX_REPEAT * STEPS_PER_CHARACTER_INSTRUCTION * CHARS_PER_STEP * CHARS_PER_STEP);
    }
  };

  /** Operands an operation walks all of (empty for one that takes a step, or stops at a literal). */
  const linearOperands = (node: Node, scope: Scope): unknown[] => {
    const args = node.args;
    if (!Array.isArray(args)) return [];
    if (node.op === '+') return args;
    if (node.op === 'call') {
      const [name, callArgs] = args as [string, unknown];
      return ONE_STEP_CALLS.has(name) || !Array.isArray(callArgs) ? [] : callArgs;
    }
    if (node.op === 'rcall') {
      const [name, receiver, callArgs] = args as [string, unknown, unknown];
      const rest = Array.isArray(callArgs) ? callArgs : [];
      if (ONE_STEP_CALLS.has(name) || (PREFIX_CALLS.has(name) && rest.some((a) => isConstant(a, scope)))) return [];
      return [receiver, ...rest];
    }
    return [];
  };

  const walk = (node: unknown, level: readonly Factor[], scope: Scope, depth: number): void => {
    if (Array.isArray(node)) {
      for (const n of node) walk(n, level, scope, depth);
      return;
    }
    if (!isNode(node)) return;
    count(level);
    const args = node.args;
    if (node.op === 'rcall' && Array.isArray(args) && LOOP_MACROS.has(args[0] as string)) {
      const [, range, macroArgs] = args as [string, unknown, unknown[]];
      const [variable, ...bodies] = Array.isArray(macroArgs) ? macroArgs : [];
      walk(range, level, scope, depth);
      if (!isNode(variable) || variable.op !== 'id' || typeof variable.args !== 'string') {
        walk(macroArgs, [...level, 'items'], scope, depth + 1);
        return;
      }
      const walked = rangeOf(range, scope, depth);
      const body = inner(walked, level);
      const slot = walked.kind === 'literal' || body.level.length === 0 ? null : body.level.length - 1;
      const constant = walked.kind === 'literal' && isConstant(range, scope);
      const rangeRoot = pathOf(range).root;
      const scalar = constant && (isLiteral(range) ? !mentionsOp(range, 'map') : rangeRoot !== null && scope.get(rangeRoot)?.scalar === true);
      const bodyScope = new Map(scope).set(variable.args, { rooted: body.rooted, depth: depth + 1, whole: body.whole, level: body.level, slot, constant, scalar, alias: null });
      const outer = times;
      if (walked.kind === 'literal') times *= literalLength(range);
      for (const b of bodies) walk(b, body.level, bodyScope, depth + 1);
      times = outer;
      return;
    }
    if (node.op === 'rcall' && Array.isArray(args) && args[0] === 'bind') {
      // cel.bind(v, value, expr): `v` is a name of its own in expr (never `action` or `run`).
      const [, receiver, bindArgs] = args as [string, unknown, unknown[]];
      const [variable, value, expr] = Array.isArray(bindArgs) ? bindArgs : [];
      walk(receiver, level, scope, depth);
      walk(value, level, scope, depth);
      const named = isNode(variable) && variable.op === 'id' && typeof variable.args === 'string' ? variable.args : null;
      // Bound to a path into the data, it is walked as the path; to a part of a variable, as that
      // variable; through a call no larger than its operand (`currency.upperAscii()`), as that.
      const kept = sizeKeptFrom(value);
      const valueRange = rangeOf(kept, scope, depth);
      const root = pathOf(kept).root;
      const alias = valueRange.kind === 'data' ? valueRange.path : null;
      const made: Bound = { rooted: false, depth, whole: null, level, slot: null, constant: isLiteral(value), scalar: isLiteral(value) && !mentionsOp(value, 'map'), alias };
      const bound = alias === null && root !== null ? (scope.get(root) ?? made) : made;
      walk(expr, level, named === null ? scope : new Map(scope).set(named, bound), depth);
      return;
    }
    if (node.op === 'in' && Array.isArray(args)) {
      // `x in list` reads the list through: one step per element, as a loop would.
      walk(args, level, scope, depth);
      const range = rangeOf(args[1], scope, depth);
      const scan = inner(range, level, true).level;
      if (range.kind === 'literal') {
        count(level, literalLength(args[1])); // a walk of the list the policy wrote
        return;
      }
      count(scan);
      countMembership(args[0], args[1], range, level, scan, scope, depth);
      return;
    }
    if (node.op === 'rcall' && Array.isArray(args) && args[0] === 'size') {
      // A string's code points are counted; a list knows its size, a list the condition makes too.
      countOperands([args[1]].filter((o) => !makesList(o)), level, scope, depth, 'chars');
    } else if (node.op === 'rcall' && Array.isArray(args) && args[0] === 'matches' && Array.isArray(args[2])) {
      countMatches(args[1], (args[2] as unknown[])[0], level, scope, depth);
    } else if (node.op === 'call' && Array.isArray(args) && args[0] === 'size' && Array.isArray(args[1])) {
      countOperands((args[1] as unknown[]).filter((o) => !makesList(o)), level, scope, depth, 'chars');
    } else if (COMPARISONS.has(node.op) && Array.isArray(args)) {
      countComparison(node.op, args, level, scope, depth);
    } else {
      countOperands(linearOperands(node, scope), level, scope, depth);
    }
    // Unary operators hold their operand as `args` itself, the others a list.
    walk(args, level, scope, depth);
  };

  walk(ast, [], new Map(), 0);
  const terms = [...counts.values()];
  return { terms, growsWithData: terms.some((t) => t.factors.length > 0) };
}

/**
 * The root name and named steps of a path (`x` and `["lines", "0"]` of `x.lines[0]`): root null
 * when the path starts from a value, steps null when a step is computed (`m[k]`).
 */
function pathOf(node: unknown): { root: string | null; steps: string[] | null } {
  const steps: string[] = [];
  let named = true;
  let n = node;
  while (isNode(n) && PATH_OPS.has(n.op)) {
    const [from, step] = n.args as [unknown, unknown];
    if (typeof step === 'string') steps.unshift(step);
    else if (isNode(step) && step.op === 'value' && (typeof step.args === 'string' || typeof step.args === 'bigint')) steps.unshift(String(step.args));
    else named = false;
    n = from;
  }
  const root = isNode(n) && n.op === 'id' && typeof n.args === 'string' ? n.args : null;
  return { root, steps: named ? steps : null };
}

/** A list the condition makes (`map`, `filter`, `split`, a list written in it): `size()` is a step. */
function makesList(node: unknown): boolean {
  if (!isNode(node)) return false;
  if (node.op === 'list') return true;
  return node.op === 'rcall' && Array.isArray(node.args) && ['map', 'filter', 'split'].includes(node.args[0] as string);
}

/** What a value is no larger than: the operand of a size-keeping call (`x.lowerAscii()`: x), else itself. */
function sizeKeptFrom(node: unknown): unknown {
  if (isNode(node) && node.op === 'rcall' && Array.isArray(node.args) && SIZE_KEEPING_CALLS.has(node.args[0] as string)) return sizeKeptFrom(node.args[1]);
  if (isNode(node) && node.op === 'call' && Array.isArray(node.args) && SIZE_KEEPING_CALLS.has(node.args[0] as string)) {
    const callArgs = node.args[1];
    if (Array.isArray(callArgs) && callArgs.length === 1) return sizeKeptFrom(callArgs[0]);
  }
  return node;
}

function mentionsOp(node: unknown, op: string): boolean {
  if (Array.isArray(node)) return node.some((n) => mentionsOp(n, op));
  return isNode(node) && (node.op === op || mentionsOp(node.args, op));
}

function mentionsSplit(node: unknown): boolean {
  if (Array.isArray(node)) return node.some(mentionsSplit);
  if (!isNode(node)) return false;
  if (node.op === 'rcall' && Array.isArray(node.args) && node.args[0] === 'split') return true;
  return mentionsSplit(node.args);
}

/** The bound for this data (Infinity past what a double holds). */
export function costOver(cost: ConditionCost, data: DataMeter): number {
  let total = 0;
  for (const t of cost.terms) {
    let product = t.nodes;
    for (const f of t.factors) {
      const size =
        f === 'items' ? data.items : f === 'items+chars' ? data.items + data.chars : f === 'data' ? data.items + data.chars / CHARS_PER_STEP : data.at(f.path, f.size, f.within);
      product *= size + 1;
    }
    total += product;
  }
  return total;
}

/**
 * The most items each list a condition walks may hold, all alike, for it to stay within the
 * budget: what `svc policy lint` tells an author of a condition whose loops nest. An element
 * of a list is taken to be one step (a number, a short string), whatever the list's length.
 */
export function itemsWithinBudget(cost: ConditionCost, budget = EVALUATION_BUDGET): number {
  const fits = (n: number) => costOver(cost, { items: n, chars: 0, at: (_path, size) => (size === 'element' ? 1 : n) }) <= budget;
  if (!fits(0)) return 0;
  let high = 1;
  while (fits(high) && high < budget) high *= 2;
  let low = high / 2;
  while (high - low > 1) {
    const mid = Math.floor((low + high) / 2);
    if (fits(mid)) low = mid;
    else high = mid;
  }
  return fits(high) ? high : Math.floor(low);
}
