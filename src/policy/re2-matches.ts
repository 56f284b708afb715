/**
 * `matches` on RE2, as CEL defines it. cel-js runs it on the JS RegExp, and V8's linear
 * fallback (src/util/regexp-guard.ts) does not take counted repetition of a group, so a
 * pattern RE2 accepts could still backtrack exponentially on text a worker sends
 * (`^([a-z]+ ?){1,30}$` on 28 letters and a `!`: 6 s). re2js runs in time linear in the text
 * times the pattern's program, which the cost bound counts (src/policy/condition-cost.ts).
 * A literal pattern is accepted only where RE2 and the JS RegExp read it alike
 * (src/policy/match-pattern.ts), so a decision recorded before this engine replays the same.
 */
import { RE2JS } from 're2js';

/** Compiled patterns kept: a policy's literals, and a few a stored policy reads from the data. */
const CACHE_LIMIT = 512;
const compiled = new Map<string, RE2JS>();

function compile(pattern: string): RE2JS {
  let re = compiled.get(pattern);
  if (re === undefined) {
    re = RE2JS.compile(pattern);
    if (compiled.size >= CACHE_LIMIT) compiled.delete(compiled.keys().next().value!);
    compiled.set(pattern, re);
  }
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
  return re.test(text);
}

/**
 * The instructions of `pattern`'s RE2 program: what a match runs per character of the text at
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
  const n = (re as unknown as { re2Input?: { prog?: { inst?: unknown[] } } }).re2Input?.prog?.inst?.length;
  if (typeof n !== 'number' || n <= 0) throw new Error('re2js internals changed: a program has no instruction list');
  return n;
}
