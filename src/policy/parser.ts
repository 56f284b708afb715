/**
 * The rule parser of the policy language (decisions 5.1):
 *
 *     policy := rule+
 *     rule   := EFFECT NAME [ "by" STRING ] "when" EXPR
 *     EFFECT := "allow" | "deny" | "require_approval"
 *
 * EXPR is CEL and runs until the next rule: a line whose first token, outside any bracket,
 * is an effect (or two words in a row, which is how a rule with a misspelt effect looks).
 * Two identifiers in a row never occur in CEL, so the boundary is unambiguous. The parser
 * collects every problem it can find (it resumes at the next rule after an error) so a lint
 * lists them all; positions are 1-based lines and code-point columns in the whole source.
 */
import { shortened } from '../encoding/cut-text.js';
import { quoted, visibleJson } from '../encoding/visible-json.js';
import { LineMap, tokenize, type Diagnostic, type SourcePos, type Token } from './tokenizer.js';

export type Effect = 'allow' | 'deny' | 'require_approval';

export const EFFECTS: ReadonlySet<string> = new Set<Effect>(['allow', 'deny', 'require_approval']);

/** CEL's reserved words: never an effect or a rule name. */
const RESERVED: ReadonlySet<string> = new Set([
  'in', 'true', 'false', 'null', 'as', 'break', 'const', 'continue', 'else', 'for', 'function', 'if',
  'import', 'let', 'loop', 'package', 'namespace', 'return', 'var', 'void', 'while', 'when', 'by',
]);

/** Largest accepted source, in UTF-16 code units. (Default: 256 KiB) */
export const MAX_POLICY_SOURCE = 256 * 1024;
/** Most rules in one policy. */
export const MAX_POLICY_RULES = 1000;

/** One rule as written. */
export interface RuleSyntax {
  effect: Effect;
  name: string;
  /** `role:<role>` from `by`, or null. */
  approver: string | null;
  /** Where the rule (its effect word) starts. */
  at: SourcePos;
  /** The condition text with comments blanked; offsets in it plus `exprOffset` are source offsets. */
  expr: string;
  exprOffset: number;
  /** Position of the first token of the condition. */
  exprAt: SourcePos;
}

export interface ParsedPolicy {
  /** Rules whose header parsed cleanly (their conditions are not yet checked). */
  rules: RuleSyntax[];
  /** Conditions of rules with a bad header, still worth checking for a lint. */
  orphanConditions: Array<{ expr: string; exprOffset: number; exprAt: SourcePos }>;
  diagnostics: Diagnostic[];
  lines: LineMap;
}

const APPROVER = /^(["'])role:([A-Za-z0-9][A-Za-z0-9._@:-]{0,127})\1$/;

/**
 * `"role:<role>"` whose role has a colon or whitespace: no one could decide its approvals, since
 * an actor is `--actor ID:ROLE`, split at the last colon (svc(1)). APPROVER let colons through
 * until 2026-11-28; versions stored before keep theirs (`stored`).
 */
function roleOutOfReach(text: string): boolean {
  const q = text[0];
  if (text.length < 2 || (q !== '"' && q !== "'") || !text.endsWith(q)) return false;
  const inner = text.slice(1, -1);
  return inner.startsWith('role:') && /[\s:]/.test(inner.slice('role:'.length));
}

/**
 * `stored`: the source was accepted when it was posted and is parsed again (src/policy/compile.ts
 * CompileOptions): checks added since then do not apply.
 */
export interface ParseOptions {
  stored?: boolean;
}

/** Parses the rule structure of a policy; never throws. */
export function parsePolicySource(source: string, opts: ParseOptions = {}): ParsedPolicy {
  const lines = new LineMap(source);
  const diagnostics: Diagnostic[] = [];
  const rules: RuleSyntax[] = [];
  const orphanConditions: ParsedPolicy['orphanConditions'] = [];
  if (source.length > MAX_POLICY_SOURCE) {
    diagnostics.push({ ...lines.pos(0), message: `policy source is longer than ${MAX_POLICY_SOURCE} characters` });
    return { rules, orphanConditions, diagnostics, lines };
  }
  const { tokens, errors, blanked } = tokenize(source);
  diagnostics.push(...errors);
  const n = tokens.length;
  const endLine = tokens.map((t) => lines.pos(t.end).line);
  const lineInitial = (k: number) => k === 0 || endLine[k - 1] !== tokens[k]!.line;
  const looksLikeHeader = (k: number): boolean => {
    const t = tokens[k];
    if (!t || t.kind !== 'ident') return false;
    if (EFFECTS.has(t.text)) return true;
    const u = tokens[k + 1];
    return !!u && u.kind === 'ident' && u.line === t.line && !RESERVED.has(t.text) && !RESERVED.has(u.text);
  };
  const ruleStart = (k: number) => lineInitial(k) && looksLikeHeader(k);
  const after = (k: number): SourcePos => (k > 0 ? lines.pos(tokens[k - 1]!.end) : lines.pos(0));
  const at = (tok: Token | undefined, k: number): SourcePos => (tok ? { offset: tok.offset, line: tok.line, column: tok.column } : after(k));
  const report = (pos: SourcePos, message: string) => diagnostics.push({ offset: pos.offset, line: pos.line, column: pos.column, message });
  const skipToNextRule = (k: number) => {
    while (k < n && !ruleStart(k)) k++;
    return k;
  };

  const seen = new Map<string, SourcePos>();
  let k = 0;
  while (k < n) {
    if (!looksLikeHeader(k)) {
      const t = tokens[k]!;
      report(t, `expected a rule ("allow", "deny" or "require_approval" NAME … when CONDITION), found ${describe(t)}`);
      k = skipToNextRule(k + 1);
      continue;
    }
    const effectTok = tokens[k]!;
    k++;
    let ok = true;
    if (!EFFECTS.has(effectTok.text)) {
      report(effectTok, `unknown effect "${effectTok.text}"; a rule starts with allow, deny or require_approval`);
      ok = false;
    }
    let name: string | null = null;
    let namePos: SourcePos | null = null;
    const nameTok = tokens[k];
    if (nameTok && nameTok.kind === 'ident' && !RESERVED.has(nameTok.text)) {
      name = nameTok.text;
      namePos = nameTok;
      k++;
      // `close-vip` or `close.vip`: a name in the shape of a tool id or a slug. Said as such
      // (rather than "expected when, found -"), and read past so the rest of the rule is checked.
      let j = k;
      let end = nameTok.end;
      while (tokens[j]?.kind === 'punct' && (tokens[j]!.text === '-' || tokens[j]!.text === '.') && tokens[j]!.offset === end) {
        const part = tokens[j + 1];
        if (!part || (part.kind !== 'ident' && part.kind !== 'number') || part.offset !== tokens[j]!.end) break;
        end = part.end;
        j += 2;
      }
      if (j > k) {
        const written = source.slice(nameTok.offset, end);
        report(nameTok, `a rule name is letters, digits and underscores: write ${written.replace(/[-.]/g, '_')}, not ${written}`);
        ok = false;
        k = j;
      }
    } else {
      report(at(nameTok, k), `expected a rule name after "${effectTok.text}", found ${nameTok ? describe(nameTok) : 'the end of the policy'}`);
      ok = false;
    }
    let approver: string | null = null;
    if (tokens[k]?.kind === 'ident' && tokens[k]!.text === 'by') {
      const byTok = tokens[k]!;
      k++;
      if (EFFECTS.has(effectTok.text) && effectTok.text !== 'require_approval') {
        report(byTok, `"by" names an approver and is allowed on require_approval rules only`);
        ok = false;
      }
      const s = tokens[k];
      if (s?.kind === 'string') {
        k++;
        const m = APPROVER.exec(s.text);
        if (roleOutOfReach(s.text) && !(m && opts.stored)) {
          report(s, `the approver must be "role:<role>" with no colon or whitespace in the role (an approver decides as --actor ID:ROLE), found ${s.text}`);
          ok = false;
        } else if (m) approver = `role:${m[2]}`;
        else {
          report(s, `the approver must be a plain string "role:<role>", found ${s.text}`);
          ok = false;
        }
      } else {
        report(at(s, k), `expected an approver string "role:<role>" after "by", found ${s ? describe(s) : 'the end of the policy'}`);
        ok = false;
        if (s && !ruleStart(k) && s.kind === 'ident' && s.text !== 'when') k++;
      }
    }
    const whenTok = tokens[k];
    if (!(whenTok?.kind === 'ident' && whenTok.text === 'when')) {
      // A rule cut short ("allow x" then a new rule) is reported where it stops, not at the next rule.
      const stop = !whenTok || ruleStart(k) ? after(k) : at(whenTok, k);
      report(stop, `expected "when" and a condition, found ${whenTok && !ruleStart(k) ? describe(whenTok) : 'the end of the rule'}`);
      k = whenTok && ruleStart(k) ? k : skipToNextRule(k + 1);
      continue;
    }
    k++;
    const first = k;
    let depth = 0;
    while (k < n) {
      const t = tokens[k]!;
      if (depth <= 0 && ruleStart(k)) break;
      if (t.kind === 'punct') {
        if (t.text === '(' || t.text === '[' || t.text === '{') depth++;
        else if (t.text === ')' || t.text === ']' || t.text === '}') depth--;
      }
      k++;
    }
    if (k === first) {
      report(lines.pos(whenTok.end), `expected a condition after "when"`);
      continue;
    }
    const exprOffset = whenTok.end;
    const expr = blanked.slice(exprOffset, tokens[k - 1]!.end);
    const exprAt: SourcePos = { offset: tokens[first]!.offset, line: tokens[first]!.line, column: tokens[first]!.column };
    if (name !== null && namePos) {
      const prev = seen.get(name);
      if (prev) {
        report(namePos, `duplicate rule name "${name}" (first defined at line ${prev.line}, column ${prev.column})`);
        ok = false;
      } else seen.set(name, namePos);
    }
    if (ok && name !== null) {
      rules.push({ effect: effectTok.text as Effect, name, approver, at: { offset: effectTok.offset, line: effectTok.line, column: effectTok.column }, expr, exprOffset, exprAt });
    } else {
      orphanConditions.push({ expr, exprOffset, exprAt });
    }
  }
  if (n === 0) report(lines.pos(0), 'a policy needs at least one rule');
  if (rules.length > MAX_POLICY_RULES) report(rules[MAX_POLICY_RULES]!.at, `a policy has at most ${MAX_POLICY_RULES} rules`);
  return { rules, orphanConditions, diagnostics, lines };
}

function describe(t: Token): string {
  const text = shortened(t.text, 24);
  return t.kind === 'string' ? `string ${visibleJson(text)}` : quoted(text);
}
