/**
 * src/kernel/replay-records.ts: a text recorded in the log with `[REDACTED]` parts stands for
 * a value that has text there. It was a regexp `^p0.+p1.+…$` built from the logged text, which
 * backtracked in polynomial time of the number of parts (a stall sweep, 2026-11-30: 1,000 parts
 * took 1.1 s) and did not compile past some thousands. No timings here.
 */
import { describe, expect, it } from 'vitest';
import { fitsShape, sameLoggedText } from '../../src/kernel/replay-records.js';

const oldShape = (parts: string[], value: string): boolean =>
  new RegExp(`^${parts.map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.+')}$`, 's').test(value);

describe('a logged text with [REDACTED] parts', () => {
  it('fits the values the regexp fitted, on every small case', () => {
    const texts: string[] = [''];
    for (let len = 1, from = 0; len <= 4; len++) {
      const to = texts.length;
      for (let k = from; k < to; k++) for (const c of ['a', 'b', '\n']) texts.push(texts[k] + c);
      from = to;
    }
    const partLists: string[][] = [];
    const short = texts.filter((t) => t.length <= 2);
    for (const a of short) for (const b of short) {
      partLists.push([a, b]);
      for (const c of ['', 'a', 'ab']) partLists.push([a, c, b]);
      partLists.push([a, '', '', b]);
    }
    for (const parts of partLists) for (const v of texts) expect([parts, v, fitsShape(parts, v)]).toEqual([parts, v, oldShape(parts, v)]);
  });

  it('ten thousand parts are compared (the regexp could not be compiled: a stack overflow)', () => {
    const logged = '[REDACTED]a'.repeat(10_000);
    expect(sameLoggedText(logged, 'xa'.repeat(10_000))).toBe(true);
    expect(sameLoggedText(logged, 'xa'.repeat(10_000) + 'b')).toBe(false);
    expect(sameLoggedText(logged, 'a'.repeat(20_000))).toBe(true);
    expect(sameLoggedText(logged, 'a'.repeat(19_999))).toBe(false);
  });
});
