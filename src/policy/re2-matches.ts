/**
 * `matches` on RE2, as CEL defines it. cel-js runs it on the JS RegExp, and V8's linear
 * fallback (src/util/regexp-guard.ts) does not take counted repetition of a group, so a
 * pattern RE2 accepts could still backtrack exponentially on text a worker sends
 * (`^([a-z]+ ?){1,30}$` on 28 letters and a `!`: 6 s). re2js runs in time linear in the text
 * times the pattern's program, which the cost bound counts (src/policy/condition-cost.ts).
 * A literal pattern is accepted only where RE2 and the JS RegExp read it alike
 * (src/policy/match-pattern.ts), but a few constructs that check lets through still differ:
 * the JS RegExp (no flags) reads the text as UTF-16 code units, its `.` refuses `\r`, U+2028
 * and U+2029 besides `\n`, its `\s` is Unicode white space (with `\v` and U+00A0), and its
 * `\a` is the letter a. So a pattern runs as the RE2 program that reads it as the JS RegExp
 * did (`jsReading`), over the text with each surrogate code unit a character of its own:
 * a decision recorded before this engine replays the same (review of session 27). A stored
 * policy's pattern from the data may still use what only one engine reads (`(?i)`); replay
 * checks such a decision on the JS RegExp too (src/kernel/replay.ts).
 */
import { RE2JS } from 're2js';

/** Compiled patterns kept, least recently used dropped first: those a stored policy reads from the data, and literals past the pinned ones. */
const CACHE_LIMIT = 512;
const compiled = new Map<string, RE2JS>();

/** Where a UTF-16 surrogate code unit is put, one character each: Supplementary Private Use Area-A. */
const UNIT_BASE = 0xf0000;
const SURROGATE = /[\uD800-\uDFFF]/g;
/** The JS RegExp's `\s` (ECMAScript WhiteSpace and LineTerminator), as RE2 class members. */
const JS_SPACE = '\\t\\n\\x{b}\\f\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}';
/** Its `\S` as class members: every code point but those. */
const JS_NON_SPACE = '\\x{0}-\\x{8}\\x{e}-\\x{1f}\\x{21}-\\x{9f}\\x{a1}-\\x{167f}\\x{1681}-\\x{1fff}\\x{200b}-\\x{2027}\\x{202a}-\\x{202e}\\x{2030}-\\x{205e}\\x{2060}-\\x{2fff}\\x{3001}-\\x{fefe}\\x{ff00}-\\x{10ffff}';

const unitEscape = (unit: number): string => `\\x{${(UNIT_BASE + unit - 0xd800).toString(16)}}`;

/** The text as `jsReading`'s program reads it: each surrogate code unit a character. */
function jsUnits(text: string): string {
  return text.replace(SURROGATE, (u) => String.fromCodePoint(UNIT_BASE + u.charCodeAt(0) - 0xd800));
}

/**
 * The RE2 pattern that reads text (as `jsUnits` makes it) as the JS RegExp without flags reads
 * `pattern`: `.` is anything but a line terminator, `\s` and `\S` are JS's white space, `\a`
 * is `a`, a surrogate code unit is a character of its own. The rest is left as written.
 */
export function jsReading(pattern: string): string {
  let out = '';
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    const code = c.charCodeAt(0);
    if (code >= 0xd800 && code <= 0xdfff) {
      out += unitEscape(code);
      continue;
    }
    if (c === '\\') {
      const next = pattern[i + 1];
      i++;
      if (next === undefined) out += c;
      else if (next === 's') out += inClass ? JS_SPACE : `[${JS_SPACE}]`;
      else if (next === 'S') out += inClass ? JS_NON_SPACE : `[${JS_NON_SPACE}]`;
      else if (next === 'a') out += 'a';
      else if (next === 'Q' && !inClass) {
        // RE2's quoting (refused in a new pattern), kept as RE2 reads it: to its \E, as written.
        const end = pattern.indexOf('\\E', i + 1);
        const stop = end < 0 ? pattern.length : end + 2;
        out += pattern.slice(i - 1, stop);
        i = stop - 1;
      }
      else if (next.charCodeAt(0) >= 0xd800 && next.charCodeAt(0) <= 0xdfff) out += unitEscape(next.charCodeAt(0));
      else out += c + next;
      continue;
    }
    if (inClass) {
      if (c === ']') inClass = false;
      out += c;
      continue;
    }
    if (c === '[') {
      inClass = true;
      out += c;
      // RE2 reads a ] right after [ or [^ as a member (refused in a new pattern: match-pattern.ts).
      if (pattern[i + 1] === '^') out += pattern[++i];
      if (pattern[i + 1] === ']') out += pattern[++i];
      continue;
    }
    out += c === '.' ? '[^\\n\\r\\x{2028}\\x{2029}]' : c;
  }
  return out;
}

/**
 * The literal patterns of compiled policies, compiled when their policy is (re2Instructions)
 * and kept: a policy set with more patterns than the cache holds would otherwise compile some
 * on every call (7–36 ms for a large one, counted as 20 steps). Bounded for `/policies/test`,
 * which compiles policies that are never stored.
 */
const PINNED_LIMIT = 10_000;
const pinned = new Map<string, RE2JS>();

function compile(pattern: string): RE2JS {
  const kept = pinned.get(pattern);
  if (kept !== undefined) return kept;
  let re = compiled.get(pattern);
  if (re === undefined) {
    re = RE2JS.compile(jsReading(pattern));
    if (compiled.size >= CACHE_LIMIT) compiled.delete(compiled.keys().next().value!);
  } else {
    compiled.delete(pattern); // least recently used goes first
  }
  compiled.set(pattern, re);
  return re;
}

/** Whether `text` holds a match of `pattern` anywhere (CEL's `matches`: unanchored). */
export function re2Matches(text: string, pattern: string): boolean {
  let re: RE2JS;
  try {
    re = compile(pattern);
  } catch (err) {
    throw new Error(`Invalid regular expression ${JSON.stringify(pattern.slice(0, 100))}: ${(err as Error).message.replace(/^error parsing regexp: /, '')}`);
  }
  return re.test(jsUnits(text));
}

/**
 * The instructions of `pattern`'s RE2 program (as `jsReading` writes it): what a match runs per character of the text at
 * most (re2js's own count; counted repetition is spelt out, so `(ab){1,50}` is 50 copies).
 * Null when RE2 cannot compile it.
 */
export function re2Instructions(pattern: string): number | null {
  let re: RE2JS;
  try {
    re = compile(pattern);
  } catch {
    return null;
  }
  if (pinned.size < PINNED_LIMIT) pinned.set(pattern, re);
  const n = (re as unknown as { re2Input?: { prog?: { inst?: unknown[] } } }).re2Input?.prog?.inst?.length;
  if (typeof n !== 'number' || n <= 0) throw new Error('re2js internals changed: a program has no instruction list');
  return n;
}
