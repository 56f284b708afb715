/**
 * Small helpers as properties: numbers read from flags and environment variables, the depth
 * check before recursive walks (D §10: no input yields a 500), literal regular expressions,
 * and HTTP field syntax (what fetch can send, svc-gateway(5) headers).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { tooDeep } from '../../src/bundle/json-depth.js';
import { escapeRegExp } from '../../src/util/escape-regexp.js';
import { validHeaderName, validHeaderValue } from '../../src/util/http-header-syntax.js';
import { decimalOf, wholeOf } from '../../src/util/number-text.js';

describe('numbers as a person writes them (flags, SVC_OPENAI_* prices)', () => {
  const numeric = fc.oneof(
    fc.stringMatching(/^\s?\d{1,20}(\.\d{0,5})?\s?$/),
    fc.tuple(fc.integer({ min: 15, max: 400 }), fc.constantFrom('1', '9', '0')).map(([n, d]) => d.repeat(n)),
    fc.stringMatching(/^\.\d{1,5}$/),
    fc.constantFrom('1e3', '0x10', 'Infinity', '-1', '', ' ', '1.', '.', '1_000', '١٢'),
    fc.string({ maxLength: 6 }),
  );

  it('decimalOf is null or the finite non-negative number the text spells (never Infinity)', () => {
    fc.assert(
      fc.property(numeric, (raw) => {
        const n = decimalOf(raw);
        if (n === null) return;
        expect(Number.isFinite(n) && n >= 0, raw).toBe(true);
        expect(n).toBe(Number(raw));
        expect(/^\s*[\d.]+\s*$/.test(raw)).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });

  it('wholeOf is null or a safe integer the text spells', () => {
    fc.assert(
      fc.property(numeric, (raw) => {
        const n = wholeOf(raw);
        if (n === null) return;
        expect(Number.isSafeInteger(n) && n >= 0).toBe(true);
        expect(String(n)).toBe(raw.trim().replace(/^0+(?=\d)/, ''));
      }),
      { numRuns: 1000 },
    );
  });

  it('a price of 310 digits is refused, not read as Infinity (found by the property above)', () => {
    expect(decimalOf('1'.repeat(310))).toBeNull();
    expect(decimalOf('9'.repeat(400))).toBeNull();
    expect(decimalOf('1'.repeat(309))).toBe(Number('1'.repeat(309)));
  });
});

describe('tooDeep (D §10: refused before a recursive walk can overflow)', () => {
  const depthOf = (v: unknown): number => (v === null || typeof v !== 'object' ? 0 : 1 + Math.max(0, ...(Array.isArray(v) ? v : Object.values(v)).map(depthOf)));
  const value = fc.jsonValue({ maxDepth: 6 });
  it('names a value exactly when the value nests deeper than the limit, and the pointer reaches a container at that depth', () => {
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 6 }), (v, limit) => {
        const at = tooDeep(v, limit);
        expect(at !== null).toBe(depthOf(v) > limit);
        if (at === null) return;
        let x: unknown = v;
        const tokens = at === '' ? [] : at.split('/').slice(1).map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
        for (const t of tokens) x = (x as Record<string, unknown>)[t];
        expect(tokens.length).toBe(limit);
        expect(x !== null && typeof x === 'object').toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});

describe('escapeRegExp', () => {
  it('matches the text itself and nothing else', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 12 }), fc.string({ maxLength: 12 }), (text, other) => {
        const re = new RegExp(`^${escapeRegExp(text)}$`, 'u');
        expect(re.test(text)).toBe(true);
        expect(re.test(other)).toBe(other === text);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('HTTP field syntax (RFC 9110 §5.1, §5.5, as fetch sends it)', () => {
  it('a name or value called valid is one Headers accepts', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 8 }), fc.string({ unit: 'binary', maxLength: 8 }), (name, value) => {
        if (validHeaderName(name)) expect(() => new Headers([[name, 'x']])).not.toThrow();
        if (validHeaderValue(value)) expect(() => new Headers([['x-svc', value]])).not.toThrow();
      }),
      { numRuns: 1000 },
    );
  });
});
