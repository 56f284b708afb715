/**
 * `matches` on RE2 reads every pattern a policy may be posted with as the JS RegExp read it
 * before session 27, so a decision recorded then replays the same (D 5.1, I replay's
 * decision_mismatches). Review of session 27: `.`, `\s`, `\S`, `\a` and characters outside
 * the BMP were read otherwise (`"a\rb".matches("a.b")` was false, now true on plain RE2).
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { policyEnvironment } from '../../src/policy/cel-env.js';
import { matchPatternProblem } from '../../src/policy/match-pattern.js';
import { re2Matches } from '../../src/policy/re2-matches.js';

const jsMatches = (text: string, pattern: string) => new RegExp(pattern).test(text);

describe('matches reads an accepted pattern as the JS RegExp did (review of session 27)', () => {
  it.each([
    ['a.b', 'a\rb'],
    ['a.b', 'a\u2028b'],
    ['^.$', '😀'],
    ['^..$', '😀'],
    ['^[^a]$', '😀'],
    ['a\\sb', 'a\u00a0b'],
    ['a\\sb', 'a\vb'],
    ['a\\Sb', 'a\u00a0b'],
    ['[\\s]', '\ufeff'],
    ['^[\\S]$', '\u3000'],
    ['\\a', 'a'],
    ['[\\a]', '\u0007'],
    ['[😀]', '\ud83d'],
  ])('%j on %j', (pattern, text) => {
    expect(matchPatternProblem(pattern)).toBeNull();
    expect(re2Matches(text, pattern)).toBe(jsMatches(text, pattern));
    expect(policyEnvironment.evaluate(`action.summary.matches(${JSON.stringify(pattern)})`, { action: { summary: text } })).toBe(jsMatches(text, pattern));
  });

  it('agrees with the JS RegExp on random accepted patterns and texts', () => {
    const atoms = ['a', 'b', '.', '\\s', '\\S', '\\w', '\\W', '\\d', '\\b', '\\a', '[^a]', '[\\sa]', '[^\\S]', '😀', '^', '$', '(a|.)', '\\.', ' '];
    const pattern = fc.array(fc.tuple(fc.constantFrom(...atoms), fc.constantFrom('', '*', '+', '?', '{2}')), { minLength: 1, maxLength: 6 }).map((parts) => parts.map(([a, q]) => (a === '^' || a === '$' || a === '\\b' ? a : a + q)).join(''));
    const text = fc.array(fc.constantFrom('a', 'b', ' ', '\r', '\n', '\v', '\u00a0', '\u2028', '\ufeff', '😀', '\ud83d', '1', '_', '\u0007'), { maxLength: 8 }).map((cs) => cs.join(''));
    fc.assert(
      fc.property(pattern, text, (p, t) => {
        fc.pre(matchPatternProblem(p) === null);
        expect(re2Matches(t, p)).toBe(jsMatches(t, p));
      }),
      { numRuns: 3000 },
    );
  });
});

describe('compiled patterns (review of session 27: the cache could thrash)', () => {
  it('keeps the literal patterns of a compiled policy however many there are: no compile on a call', async () => {
    const { RE2JS } = await import('re2js');
    const { compilePolicy } = await import('../../src/policy/compile.js');
    // 600 rules, each its own pattern: more than the 512 patterns the shared cache keeps.
    const rules = Array.from({ length: 600 }, (_, i) => `deny r${i} when action.summary.matches("^code-${i}-[a-z]+$")`).join('\n');
    compilePolicy({ name: 'many', version: '1' }, rules);
    const spy = vi.spyOn(RE2JS, 'compile');
    try {
      for (let round = 0; round < 2; round++) for (let i = 0; i < 600; i++) re2Matches(`code-${i}-x`, `^code-${i}-[a-z]+$`);
      expect(spy).not.toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  });
});
