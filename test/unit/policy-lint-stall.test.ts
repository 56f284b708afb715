/**
 * POST /v1/policies (and a /policies/test `policy_b.source`) compiles on svcd's one event loop:
 * the messages of a condition that fails to parse or type-check are found in time linear in
 * the condition (stall sweep, 2026-11-30; docs/design.md, Policy syntax). Not timed: the
 * characters handed to regular expressions are counted instead. Before, `logicWord` ran two
 * per word over the condition's rest and prefix (3×10^10 characters for a 250,000-character
 * condition, 0.9 s) and the "has no member" hint one backtracking one over the prefix (a long
 * string or name before `action.tol`: 6–8 s).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { lintPolicy, pathBeforeDot } from '../../src/policy/compile.js';

const original = RegExp.prototype.exec;
afterEach(() => {
  RegExp.prototype.exec = original;
});

/** lintPolicy's diagnostics, and how many characters it handed RegExp exec (test, match and replace go through it). */
function lintCountingRegExp(source: string): { messages: string[]; chars: number } {
  let chars = 0;
  RegExp.prototype.exec = function (this: RegExp, s: string) {
    chars += String(s).length;
    return original.call(this, s);
  };
  try {
    return { messages: lintPolicy(source).map((d) => d.message), chars };
  } finally {
    RegExp.prototype.exec = original;
  }
}

const N = 250_000;

describe('policy messages are linear in the condition', () => {
  it('a condition that fails to parse is scanned for and/or/not once', () => {
    const source = 'deny x when ' + 'a + '.repeat(N / 4 - 5) + ')';
    const { messages, chars } = lintCountingRegExp(source);
    expect(messages).toEqual(['Exceeded maxAstNodes (2000)']);
    expect(chars).toBeLessThan(source.length / 10);
  });

  it('an "and" is still named, and a member .and is not', () => {
    expect(lintPolicy('deny x when action.tool == "a" and action.summary == "b"')[0]!.message).toMatch(/^"and" is not a CEL operator/);
    const { messages, chars } = lintCountingRegExp('deny x when (' + 'a.b '.repeat(N / 4 - 10) + ' and b');
    expect(messages[0]).toMatch(/^"and" is not a CEL operator: write &&/);
    expect(chars).toBeLessThan(N / 10);
  });

  it('"has no member" reads the path before the key without a regular expression over the prefix', () => {
    for (const before of ['action.tool == "' + 'a'.repeat(N) + '"', 'action.args.' + 'a'.repeat(N) + ' == 1']) {
      const source = `deny x when ${before} && action.tol == ""`;
      const { messages, chars } = lintCountingRegExp(source);
      expect(messages).toEqual([expect.stringMatching(/^action has no member "tol" \(its members: tool, connector/)]);
      expect(chars).toBeLessThan(source.length / 10);
    }
    expect(lintPolicy('deny x when run . usage .  tokenz > 1')[0]!.message).toMatch(/^run.usage has no member "tokenz" \(its members: tokens, usd\)/);
  });

  it('pathBeforeDot reads what the regular expression it replaces read, each character at most twice', () => {
    const old = (s: string, end: number) => /([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*\.\s*$/.exec(s.slice(0, end))?.[1];
    const alphabet = ['a', 'b', '_', '1', '.', ' ', '\n', '\u00a0', '"', '(', 'é'];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    for (let n = 0; n < 20_000; n++) {
      const len = next() % 14;
      let s = '';
      for (let k = 0; k < len; k++) s += alphabet[next() % alphabet.length];
      expect(pathBeforeDot(s, s.length), JSON.stringify(s)).toBe(old(s, s.length));
    }
    const long = 'x'.repeat(N) + ' . ' + 'y'.repeat(N) + '.';
    const steps = { count: 0 };
    expect(pathBeforeDot(long, long.length, steps)).toBe(long.slice(0, -1));
    expect(steps.count).toBeLessThanOrEqual(2 * long.length);
  });
});
