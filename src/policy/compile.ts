/**
 * Compiling a policy: the rule parser plus CEL parsing and type-checking of every condition
 * against the declared `action` and `run` variables (decisions 5.1). `lintPolicy` lists every
 * problem; `compilePolicy` throws the first as `policy_invalid` with `details.line`,
 * `details.column` and `details.message` (1-based, in the whole source).
 */
import { SvcError } from '../errors.js';
import type { Decision, PolicyRef } from '../types.js';
import { jsMatchesPolicyEnvironment, membersOf, policyEnvironment, type CelProgram } from './cel-env.js';
import { conditionCost, itemsWithinBudget, type ConditionCost, type Factor } from './condition-cost.js';
import { matchPatternProblem } from './match-pattern.js';
import { parsePolicySource, type Effect } from './parser.js';
import type { Diagnostic, SourcePos } from './tokenizer.js';
import type { LineMap } from './tokenizer.js';
import { quoted } from '../encoding/visible-json.js';

export type { Diagnostic } from './tokenizer.js';

/** A rule ready to evaluate. */
export interface CompiledRule {
  name: string;
  effect: Effect;
  /** The decision the rule yields when it matches. */
  decision: Decision;
  /** `role:<role>` from `by`, or null (then the requester's manager approves). */
  approver: string | null;
  /** The condition as written (comments blanked), for messages. */
  condition: string;
  line: number;
  program: CelProgram;
  /** A bound on what the condition costs to evaluate (src/policy/condition-cost.ts). */
  cost: ConditionCost;
}

/** A policy version, compiled once and evaluated on every proposal. */
export interface CompiledPolicy {
  ref: PolicyRef;
  rules: CompiledRule[];
}

export const EFFECT_DECISION: Record<Effect, Decision> = {
  allow: 'allow',
  deny: 'deny',
  require_approval: 'approval_required',
};

interface RangedError {
  summary?: string;
  message?: string;
  code?: string;
  range?: { start: number; end: number };
}

/** cel-js's token names as a policy author reads them (its messages say `RPAREN`). */
const TOKEN_WORDS: Record<string, string> = {
  EOF: 'the end of the condition',
  NUMBER: 'a number',
  STRING: 'a string',
  BOOLEAN: 'true or false',
  NULL: 'null',
  IDENTIFIER: 'a name',
  BYTES: 'a bytes literal',
  PLUS: '"+"',
  MINUS: '"-"',
  MULTIPLY: '"*"',
  DIVIDE: '"/"',
  MODULO: '"%"',
  EQ: '"=="',
  NE: '"!="',
  LT: '"<"',
  LE: '"<="',
  GT: '">"',
  GE: '">="',
  AND: '"&&"',
  OR: '"||"',
  NOT: '"!"',
  IN: '"in"',
  LPAREN: '"("',
  RPAREN: '")"',
  LBRACKET: '"["',
  RBRACKET: '"]"',
  LBRACE: '"{"',
  RBRACE: '"}"',
  DOT: '"."',
  COMMA: '","',
  COLON: '":"',
  QUESTION: '"?"',
};
const tokenWords = (name: string) => TOKEN_WORDS[name] ?? name;

/** What to write instead of a character CEL has no use for, where it is a common slip. */
const CHARACTER_HINTS: Record<string, string> = {
  '=': ' (compare with ==)',
  // Typographic quotes, as a word processor or a chat pastes them.
  '\u201c': ' (write strings between straight quotes, " or \')',
  '\u201d': ' (write strings between straight quotes, " or \')',
  '\u2018': ' (write strings between straight quotes, " or \')',
  '\u2019': ' (write strings between straight quotes, " or \')',
};

function celMessage(err: RangedError, expr: string): string {
  // The parser recurses once per prefix operator before its node limit applies: 20,000 `!`
  // overflow the stack. That is a condition too deep, not a fault of the kernel.
  if (err instanceof RangeError) return 'the condition nests too deeply to parse (a long chain of prefix operators or brackets)';
  const text = err.summary ?? String(err.message ?? err).split('\n')[0] ?? 'invalid condition';
  const call = /^found no matching overload for '(and|or|not)\(/i.exec(text);
  if (call) return `"${call[1]}" is not a CEL operator: write ${LOGIC_WORDS[call[1]!.toLowerCase()]} (CEL writes and, or, not as &&, ||, !)`;
  if (err.code === 'unknown_variable') {
    // A policy author asking for the time (business hours): conditions have no clock, so a replay decides as the kernel did.
    const clock = /^Unknown variable: (now|today|time|clock|date)$/i.test(text);
    return `${text} (a condition reads "action" and "run"${clock ? '; it has no clock: a time it needs comes in run.input, as timestamp(run.input.requested_at), see svc-policy(5)' : ''})`;
  }
  const escape = /^Invalid escape sequence: \\(.)/.exec(text);
  if (escape) {
    // "\d" of a matches pattern: a CEL string reads the backslash first (svc-policy(5) CONDITIONS).
    return `${text} (in a CEL string a backslash starts an escape: write "\\\\${escape[1]}" for the two characters \\${escape[1]} a pattern needs, or a raw string, r"\\${escape[1]}")`;
  }
  if (text === 'Unexpected token: EOF') return 'unexpected end of the condition';
  const unexpected = /^Unexpected token: ([A-Z_]+)$/.exec(text);
  if (unexpected) return `unexpected ${tokenWords(unexpected[1]!)}`;
  const expected = /^Expected ([A-Z_]+), got ([A-Z_]+)$/.exec(text);
  if (expected) return `expected ${tokenWords(expected[1]!)}, found ${tokenWords(expected[2]!)}`;
  const character = /^Unexpected character: '?(.+?)'?$/.exec(text);
  if (character) return `unexpected character ${quoted(character[1]!)}${CHARACTER_HINTS[character[1]!] ?? ''}`;
  // `action.tol`: name the members that `action` has, read from the text before the key.
  const key = /^No such key: (.+)$/.exec(text);
  const start = err.range?.start;
  if (key && typeof start === 'number') {
    const path = pathBeforeDot(expr, start)?.replace(/\s+/g, '');
    const members = path ? membersOf(path) : null;
    if (members) return `${path} has no member "${key[1]}" (its members: ${members.join(', ')})`;
  }
  return text;
}

const isWordChar = (c: string) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c === '_';
const isNameStart = (c: string) => isWordChar(c) && !(c >= '0' && c <= '9');
const isSpace = (c: string) => /\s/.test(c);

/**
 * The dotted path (`action`, `run . usage`) that `expr` holds just before `end`, followed by a
 * dot: what `/([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*\.\s*$/` captures from
 * `expr.slice(0, end)`, or undefined. Read backwards, each character once: that regular
 * expression retried every start position and rewalked the identifier or string under it, so
 * a condition of 250,000 characters held svcd for 6–8 s (stall sweep, docs/design.md).
 */
export function pathBeforeDot(expr: string, end: number, steps?: { count: number }): string | undefined {
  let i = end;
  const back = (ok: (c: string) => boolean) => {
    while (i > 0 && ok(expr[i - 1]!)) {
      if (steps) steps.count++;
      i--;
    }
  };
  back(isSpace);
  if (i === 0 || expr[i - 1] !== '.') return undefined;
  i--;
  back(isSpace);
  const pathEnd = i;
  let start = -1;
  for (;;) {
    const runEnd = i;
    back(isWordChar);
    // The name starts at the run's first letter or underscore (a digit cannot start one).
    let first = i;
    while (first < runEnd && !isNameStart(expr[first]!)) first++;
    if (first === runEnd) break; // no name here: the path is what was read before
    start = first;
    if (first > i) break; // digits before the name: the path cannot reach further
    // Another `name .` before this one?
    const save = i;
    back(isSpace);
    if (i === 0 || expr[i - 1] !== '.') break;
    i--;
    back(isSpace);
    if (i === 0 || !isWordChar(expr[i - 1]!)) {
      i = save;
      break;
    }
  }
  return start < 0 ? undefined : expr.slice(start, pathEnd);
}

/**
 * `and`, `or`, `not` as SQL and Python write them: CEL spells them &&, || and !, and cel-js
 * reports such a word as an "unexpected character" somewhere inside it (`d` of `and`, or the
 * `n` of `not` at the name after it). Found only once the condition failed to parse, outside
 * strings and not as a member (`.and`), so the message can name the word and what to write.
 */
const LOGIC_WORDS: Record<string, string> = { and: '&&', or: '||', not: '!' };
function logicWord(expr: string): { start: number; word: string; cel: string } | null {
  let i = 0;
  while (i < expr.length) {
    const c = expr[i]!;
    if (c === '"' || c === "'") {
      const triple = expr.startsWith(c.repeat(3), i);
      const close = triple ? c.repeat(3) : c;
      i += close.length;
      while (i < expr.length && !expr.startsWith(close, i)) i += expr[i] === '\\' ? 2 : 1;
      i += close.length;
      continue;
    }
    if (!isNameStart(c)) {
      i++;
      continue;
    }
    // Read in place, each character once: a regular expression over `expr.slice(i)` and
    // `expr.slice(0, i)` per word made this quadratic (stall sweep, docs/design.md).
    let end = i + 1;
    while (end < expr.length && isWordChar(expr[end]!)) end++;
    const word = expr.slice(i, end);
    const lower = word.toLowerCase();
    const cel = Object.hasOwn(LOGIC_WORDS, lower) ? LOGIC_WORDS[lower] : undefined;
    if (cel && !afterDot(expr, i)) return { start: i, word, cel };
    i = end;
  }
  return null;
}

/** Whether `expr` has a dot before `i`, white space between (a member: `x.and`). */
function afterDot(expr: string, i: number): boolean {
  while (i > 0 && isSpace(expr[i - 1]!)) i--;
  return i > 0 && expr[i - 1] === '.';
}

/** Checks one condition; returns its program or pushes a diagnostic. */
function checkCondition(
  cond: { expr: string; exprOffset: number; exprAt: SourcePos },
  lines: LineMap,
  diagnostics: Diagnostic[],
  opts: CompileOptions,
): CelProgram | null {
  const place = (err: RangedError) => {
    const start = err.range?.start;
    const pos = typeof start === 'number' && start >= 0 && start <= cond.expr.length ? lines.pos(cond.exprOffset + start) : cond.exprAt;
    // A range inside the blanked leading whitespace means "the condition": point at its first token.
    const at = pos.offset < cond.exprAt.offset ? cond.exprAt : pos;
    diagnostics.push({ offset: at.offset, line: at.line, column: at.column, message: celMessage(err, cond.expr) });
  };
  let program: CelProgram;
  try {
    program = (opts.matches === 'js-regexp' ? jsMatchesPolicyEnvironment() : policyEnvironment).parse(cond.expr);
  } catch (err) {
    const w = err instanceof RangeError ? null : logicWord(cond.expr);
    if (w) {
      const at = lines.pos(cond.exprOffset + w.start);
      diagnostics.push({ offset: at.offset, line: at.line, column: at.column, message: `"${w.word}" is not a CEL operator: write ${w.cel} (CEL writes and, or, not as &&, ||, !)` });
      return null;
    }
    place(err as RangedError);
    return null;
  }
  let checked: ReturnType<CelProgram['check']>;
  try {
    checked = program.check();
  } catch (err) {
    place(err as RangedError);
    return null;
  }
  if (!checked.valid) {
    place((checked.error ?? { summary: 'condition does not type-check' }) as RangedError);
    return null;
  }
  if (checked.type !== 'bool' && checked.type !== 'dyn') {
    diagnostics.push({ ...cond.exprAt, message: `a condition must be a bool, but this one is ${checked.type}` });
    return null;
  }
  const badPattern = opts.stored ? null : invalidLiteralPattern(program.ast);
  if (badPattern) {
    place(badPattern);
    return null;
  }
  return program;
}

interface AstNode {
  op: string;
  args: unknown;
  start?: number;
}

const isAstNode = (v: unknown): v is AstNode => typeof v === 'object' && v !== null && typeof (v as AstNode).op === 'string';

/**
 * The first `matches` whose pattern cannot be one (src/policy/match-pattern.ts): one that does
 * not compile would fail every evaluation, and a failing condition counts fail-closed (D 5.1),
 * a deny rule that always matches, an allow that never does; one RE2 and JS read differently
 * would replay otherwise than decided; one not written in the condition has no cost bound.
 * Said when the policy is posted instead.
 */
function invalidLiteralPattern(node: unknown): RangedError | null {
  for (const pattern of matchesPatterns(node)) {
    if (pattern.op === 'value' && typeof pattern.args === 'string') {
      const why = matchPatternProblem(pattern.args);
      if (why !== null) return { summary: `matches: ${why}`, range: { start: pattern.start ?? 0, end: pattern.start ?? 0 } };
    } else {
      // A pattern a worker or a run's starter sends could be any program: what it costs is
      // known only from one written here (src/policy/condition-cost.ts).
      const at = pattern.start ?? 0;
      return { summary: 'matches: write the pattern in the condition as a string; one taken from the action or the run is not accepted', range: { start: at, end: at } };
    }
  }
  return null;
}

/** The pattern argument of every `matches` call in a condition's AST, in source order. */
function matchesPatterns(node: unknown, out: AstNode[] = []): AstNode[] {
  if (Array.isArray(node)) {
    for (const n of node) matchesPatterns(n, out);
    return out;
  }
  if (!isAstNode(node)) return out;
  const args = Array.isArray(node.args) ? node.args : [];
  if ((node.op === 'rcall' || node.op === 'call') && args[0] === 'matches') {
    const callArgs = node.op === 'rcall' ? args[2] : args[1];
    const pattern = Array.isArray(callArgs) ? callArgs[callArgs.length - 1] : null;
    if (isAstNode(pattern)) out.push(pattern);
  }
  // Unary operators hold their operand as `args` itself, the others a list.
  return matchesPatterns(node.args, out);
}

interface Compiled {
  rules: CompiledRule[];
  diagnostics: Diagnostic[];
}

/**
 * `stored`: the source was accepted when it was posted and is compiled again (after a
 * restart, for replay). Checks added since then must not turn an accepted, pinned policy
 * into one that no longer loads: a stored policy decides as it did when it was accepted.
 */
export interface CompileOptions {
  stored?: boolean;
  /**
   * `js-regexp`: `matches` evaluates on the JS RegExp, as it did until 2026-11-29 (replay of
   * a decision recorded then; src/kernel/replay.ts). Decisions are made on RE2 only.
   */
  matches?: 're2' | 'js-regexp';
}

function compileSource(source: string, opts: CompileOptions = {}): Compiled {
  const parsed = parsePolicySource(source, { stored: opts.stored });
  const diagnostics = [...parsed.diagnostics];
  const rules: CompiledRule[] = [];
  for (const rule of parsed.rules) {
    const program = checkCondition(rule, parsed.lines, diagnostics, opts);
    if (!program) continue;
    rules.push({
      name: rule.name,
      effect: rule.effect,
      decision: EFFECT_DECISION[rule.effect],
      approver: rule.approver,
      condition: rule.expr.trim(),
      line: rule.at.line,
      program,
      cost: conditionCost(program.ast),
    });
  }
  for (const cond of parsed.orphanConditions) checkCondition(cond, parsed.lines, diagnostics, opts);
  diagnostics.sort((a, b) => a.offset - b.offset);
  // The tokenizer and CEL both see an unterminated string: report it once.
  const unique = diagnostics.filter((d, i) => i === 0 || d.offset !== diagnostics[i - 1]!.offset);
  return { rules, diagnostics: unique };
}

/**
 * Notes on conditions that compile but whose loops nest (src/policy/condition-cost.ts): on a
 * large enough action such a condition is not evaluated and fails closed, and its author
 * should know how large before a worker finds out. Never throws.
 */
export function policyNotes(source: string): Diagnostic[] {
  const parsed = parsePolicySource(source);
  const compiled = new Map(compileSource(source).rules.map((r) => [r.name, r]));
  const notes: Diagnostic[] = [];
  for (const rule of parsed.rules) {
    const program = compiled.get(rule.name)?.program;
    if (program && hasBackspacePattern(program.ast)) {
      notes.push({
        ...rule.exprAt,
        message: `note: rule ${rule.name} matches a pattern that holds a backspace, which \\b is in a CEL string: for RE2's word boundary write "\\\\b" or r"\\b" (svc-policy(5) CONDITIONS)`,
      });
    }
    const cost = compiled.get(rule.name)?.cost;
    if (!cost) continue;
    const deepest = cost.terms.reduce((a, t) => (t.factors.length > a.factors.length ? t : a), cost.terms[0]!);
    if (deepest.factors.length < 2) continue;
    // Loops nested in loops are named as such; a value walked inside a loop only when no two loops nest.
    const loops = deepest.factors.filter(isLoopFactor);
    const walksValue = loops.length < 2;
    const shown = walksValue ? deepest.factors : loops;
    const lists = shown.map(factorName);
    const where = shown.every((f) => typeof f !== 'string') ? 'in each' : "in each (a made list counts all the action's and run's data)";
    notes.push({
      ...rule.exprAt,
      message:
        `note: rule ${rule.name} ${walksValue ? 'walks a value inside a loop' : 'nests loops'} (${lists.join(' × ')}); past about ${itemsWithinBudget(cost).toLocaleString('en-US')} items ` +
        `${where} it is not evaluated and fails closed (svc-policy(5), DECISIONS item 5)${membershipHint(shown)}`,
    });
  }
  return notes;
}

/**
 * A `matches` pattern written with a backspace (U+0008) in it: "\b" in a CEL string is the
 * backspace escape, not RE2's word boundary, so `matches("\bfoo\b")` compiles and never
 * matches a word (a deny that never denies). A pattern may mean one, so it is a note, not a
 * problem.
 */
function hasBackspacePattern(node: unknown): boolean {
  return matchesPatterns(node).some((p) => p.op === 'value' && typeof p.args === 'string' && p.args.includes('\b'));
}

/**
 * An `in` over a path is sized as a list (its items) and what is on its left once per item:
 * a bound on a product, which reads as if an allow list of a few thousand entries failed
 * closed. At decision time a map there is one lookup and a string or number on the left is
 * not walked (svc-policy(5) recommends `x in run.input.allowed` with a map), so say so.
 */
function membershipHint(shown: readonly Factor[]): string {
  const member = shown.find((f): f is Exclude<Factor, string> => typeof f !== 'string' && f.size === 'member');
  if (!member) return '';
  return `; the bound is the product of the two, and "in" walks ${member.path.join('.')} only when it is a list (a map there is looked up in one step, and a string or number on its left is not walked)`;
}

/** A factor a loop (or an `in`) adds, not the size of a value an operation walks. */
function isLoopFactor(f: Factor): boolean {
  return typeof f === 'string' ? f !== 'data' : f.size === 'length' || f.size === 'nested' || f.size === 'member';
}

function factorName(f: Factor): string {
  if (f === 'items') return 'a list it makes';
  if (f === 'items+chars') return 'a list split from text';
  if (f === 'data') return "a value it makes, sized by all the action's and run's data";
  const path = f.path.join('.');
  if (f.size === 'nested') return `everything under ${path}`;
  if (f.size === 'deep') return `the text and lists under ${path}`;
  if (f.size === 'chars') return `the characters of ${path}`;
  if (f.size === 'element') return `the largest element of ${path}`;
  return path;
}

/** Every problem in a policy source, in source order (empty when it compiles). Never throws. */
export function lintPolicy(source: string): Diagnostic[] {
  return compileSource(source).diagnostics;
}

/** Compiles a policy or throws SvcError `policy_invalid` for its first problem. */
export function compilePolicy(ref: PolicyRef, source: string, opts: CompileOptions = {}): CompiledPolicy {
  const { rules, diagnostics } = compileSource(source, opts);
  const first = diagnostics[0];
  if (first) {
    throw new SvcError('policy_invalid', `line ${first.line}, column ${first.column}: ${first.message}`, {
      line: first.line,
      column: first.column,
      message: first.message,
      problems: diagnostics.map((d) => ({ line: d.line, column: d.column, message: d.message })),
    });
  }
  return { ref: { name: ref.name, version: ref.version }, rules };
}
