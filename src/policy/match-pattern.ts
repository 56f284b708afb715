/**
 * What a policy's literal `matches` pattern must be for it to mean the same thing wherever it
 * is read. CEL defines `matches` as RE2 (svc-policy(5) says to write RE2), and svc runs it on
 * RE2 (src/policy/re2-matches.ts); until 2026-11-29 it ran on cel-js's JS RegExp, and the
 * decisions made then are replayed now. Most patterns read the same in both; the rest would
 * decide differently on replay than when recorded: `\z` is "end of text" in RE2 and the
 * letter z in a JS RegExp, `[[:alpha:]]` a class of letters in RE2 and an odd set of
 * punctuation in JS. So a pattern is accepted only when RE2 compiles it, JS compiles it, and it
 * uses none of the constructs the two read differently; the message says what to write
 * instead. The text can still be read differently (the JS `.` stops at `\r`, its `\s` takes
 * U+00A0): replay checks such a decision on both engines (src/kernel/replay.ts).
 */
import { re2Problem } from '../util/linear-regexp.js';

/** RE2 escapes a JS RegExp (without the `u` flag) reads as a plain letter, and what to write instead. */
const MISREAD_ESCAPES: Record<string, string> = {
  A: 'write ^ for the start of the text',
  z: 'write $ for the end of the text',
  Q: 'escape each special character with \\ instead of \\Q…\\E',
  E: 'escape each special character with \\ instead of \\Q…\\E',
  C: 'write . for any character',
  p: 'write the characters as a class such as [A-Za-z]; Unicode classes are not available',
  P: 'write the characters as a negated class such as [^A-Za-z]; Unicode classes are not available',
};

/** `[:name:]` or `[:^name:]`, RE2's POSIX classes (inside a class: `[[:alpha:]]`, `[a[:digit:]]`). */
const POSIX_CLASS = /^(?:[^\]\\]|\\.)*?\[:\^?(?:alnum|alpha|ascii|blank|cntrl|digit|graph|lower|print|punct|space|upper|word|xdigit):\]/;

/** Why `pattern` cannot be a `matches` pattern, or null when it can. */
export function matchPatternProblem(pattern: string): string | null {
  const jsProblem = jsCompileProblem(pattern);
  const re2 = re2Problem(pattern);
  if (re2 !== null) {
    if (jsProblem !== null) return `the pattern is not a valid regular expression (${jsProblem})`;
    return `the pattern is not valid RE2 (${re2}): backreferences and lookaround have no RE2 form`;
  }
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '\\') {
      const next = pattern[i + 1] ?? '';
      const fix = MISREAD_ESCAPES[next];
      if (fix !== undefined) return `\\${next} means something else to the JavaScript engine than to RE2; ${fix}`;
      if (next === 'x' && pattern[i + 2] === '{') return '\\x{…} means something else to the JavaScript engine than to RE2; write \\xHH';
      i++; // skip the escaped character, whatever it is
      continue;
    }
    // RE2 reads a ] right after [ or [^ as a member; JS reads [] as the empty class and [^] as any character.
    if (c === '[' && (pattern[i + 1] === ']' || (pattern[i + 1] === '^' && pattern[i + 2] === ']'))) {
      return 'a ] first in a class means something else to the JavaScript engine than to RE2; escape it as \\]';
    }
    if (c === '[' && POSIX_CLASS.test(pattern.slice(i + 1))) {
      return 'POSIX classes such as [[:alpha:]] mean something else to the JavaScript engine than to RE2; write the class out, such as [A-Za-z]';
    }
    if (c === '(' && pattern[i + 1] === '?' && /^[imsU-]+[):]/.test(pattern.slice(i + 2))) {
      return 'flag groups such as (?i) are RE2 syntax the JavaScript engine does not support; write the cases out, such as [Cc][Rr][Mm]';
    }
  }
  return jsProblem === null ? null : `the pattern is RE2 the JavaScript engine cannot compile (${jsProblem})`;
}

function jsCompileProblem(pattern: string): string | null {
  try {
    new RegExp(pattern);
    return null;
  } catch (err) {
    return (err as Error).message.replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, '');
  }
}
