/**
 * svc-policy(5): a literal `matches` pattern is accepted only when RE2 (what CEL defines) and
 * the JS RegExp (what cel-js runs) read it alike. Model-based: patterns built from regexp
 * tokens, inputs from the characters they name; for every accepted pattern both engines must
 * decide every input the same way. (Unicode spaces and line separators, where `\s` and `.`
 * differ and svc-policy(5) says so, are left out of the inputs.)
 */
import fc from 'fast-check';
import { RE2JS } from 're2js';
import { describe, expect, it } from 'vitest';
import { matchPatternProblem } from '../../src/policy/match-pattern.js';

const TOKENS = ['a', 'b', '.', '*', '+', '?', '|', '(', ')', '[', ']', '^', '$', '-', '\\d', '\\w', '\\s', '\\b', '\\B', '{2}', '{1,}', '{,2}', '\\.', '(?:', '[^', '\\-', '\\n', '\\t', '\\x41', '\\z', '\\A', '[[:alpha:]]', '(?i)', '\\pL', '\\1', '(?=', '/', '{', '}', ',', '1'];
const INPUT = ['a', 'b', 'A', '1', '-', '.', '{', '}', ',', '\n', '\t', ' ', '/', 'z', 'p', 'L', '\\'];

describe('matchPatternProblem (svc-policy(5) CONDITIONS)', () => {
  it('every pattern it accepts decides every input as RE2 does', () => {
    let accepted = 0;
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...TOKENS), { minLength: 1, maxLength: 6 }), fc.array(fc.array(fc.constantFrom(...INPUT), { maxLength: 6 }), { minLength: 1, maxLength: 8 }), (tokens, inputs) => {
        const p = tokens.join('');
        if (matchPatternProblem(p) !== null) return true;
        accepted++;
        const js = new RegExp(p);
        const re2 = RE2JS.compile(p);
        return inputs.every((chars) => {
          const s = chars.join('');
          return js.test(s) === re2.matcher(s).find();
        });
      }),
      { numRuns: 3000 },
    );
    expect(accepted).toBeGreaterThan(500); // the property was not vacuous
  });
});
