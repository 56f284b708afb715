/**
 * Invariants of the encoding helpers as properties (fast-check). Each property names the
 * section it comes from: D §1 (JSON, RFC 8785 canonical JSON, base64url), D §10 (request
 * bodies: limits, I-JSON), and the helpers' own contracts where the spec says nothing.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeBase64url, encodeBase64url } from '../../src/encoding/base64url.js';
import { canonicalHash, canonicalJson, sha256Hex } from '../../src/encoding/canonical-json.js';
import { cutText, shortened } from '../../src/encoding/cut-text.js';
import { bodyProblem, jsonDepth, textProblem } from '../../src/encoding/json-limits.js';
import { pointerToken } from '../../src/encoding/json-pointer.js';
import { unescapeMapped, unescapeOnce } from '../../src/encoding/json-unescape.js';
import { decodeUtf8Strict } from '../../src/encoding/utf8.js';
import { visibleJson, quoted } from '../../src/encoding/visible-json.js';
import { hasLoneSurrogate, wellFormedJson } from '../../src/encoding/well-formed-json.js';

const RUNS = { numRuns: 300 };

/** Any double JSON can carry (finite; -0 included, which JSON writes as 0). */
const finiteDouble = fc.double({ noNaN: true, noDefaultInfinity: true });
/** Strings of every kind of UTF-16 unit, but well formed (no lone surrogate): what I-JSON allows. */
const wellFormedString = fc.string({ unit: 'grapheme-composite', maxLength: 12 });
/** JSON values whose strings are well formed, with doubles of every magnitude. */
const jsonValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { maxDepth: 4, depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    finiteDouble,
    fc.integer(),
    wellFormedString,
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(wellFormedString, tie('value'), { maxKeys: 5 }),
  ),
})).value;

/** A reference RFC 8785 serializer written from the RFC's text (§3.2.2, §3.2.3). */
function jcsReference(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  // §3.2.2.3: numbers as ECMAScript Number.prototype.toString, -0 as 0.
  if (typeof v === 'number') return Object.is(v, -0) ? '0' : String(v);
  // §3.2.2.2: strings as ECMAScript JSON.stringify writes them.
  if (typeof v === 'string') return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map(jcsReference).join(',')}]`;
  // §3.2.3: members sorted by the UTF-16 code units of their names.
  const keys = Object.keys(v as object).sort((a, b) => {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const d = a.charCodeAt(i) - b.charCodeAt(i);
      if (d !== 0) return d;
    }
    return a.length - b.length;
  });
  return `{${keys.map((k) => `${JSON.stringify(k)}:${jcsReference((v as Record<string, unknown>)[k])}`).join(',')}}`;
}

/** The same value with every object's members inserted in another (random) order. */
function reordered(v: unknown, rnd: () => number): unknown {
  if (Array.isArray(v)) return v.map((x) => reordered(x, rnd));
  if (v === null || typeof v !== 'object') return v;
  const entries = Object.entries(v);
  for (let i = entries.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [entries[i], entries[j]] = [entries[j]!, entries[i]!];
  }
  return Object.fromEntries(entries.map(([k, x]) => [k, reordered(x, rnd)]));
}

describe('canonical JSON is RFC 8785 (D §1)', () => {
  it('agrees with a reference serializer written from RFC 8785 §3.2', () => {
    fc.assert(fc.property(jsonValue, (v) => {
      expect(canonicalJson(v)).toBe(jcsReference(v));
    }), RUNS);
  });

  it('parses back to an equal value and is idempotent', () => {
    fc.assert(
      fc.property(jsonValue, (v) => {
        const text = canonicalJson(v);
        const back = JSON.parse(text) as unknown;
        // -0 comes back as 0 (JSON has one zero); everything else is equal.
        expect(back).toEqual(JSON.parse(JSON.stringify(v)));
        expect(canonicalJson(back)).toBe(text);
      }),
      RUNS,
    );
  });

  it('does not depend on the order members were inserted in (so neither do the hashes over it)', () => {
    fc.assert(
      fc.property(jsonValue, fc.integer(), (v, seed) => {
        let s = seed >>> 0 || 1;
        const rnd = () => ((s = (s * 1103515245 + 12345) >>> 0) % 1_000_000) / 1_000_000;
        const other = reordered(v, rnd);
        expect(canonicalJson(other)).toBe(canonicalJson(v));
        expect(canonicalHash(other)).toBe(canonicalHash(v));
      }),
      RUNS,
    );
  });

  it('writes every finite number as ES Number.prototype.toString does (§3.2.2.3), and the text reads back to the same double', () => {
    fc.assert(
      fc.property(finiteDouble, (n) => {
        const text = canonicalJson(n);
        expect(text).toBe(Object.is(n, -0) ? '0' : String(n));
        expect(Number(text)).toBe(n === 0 ? 0 : n);
        expect(canonicalJson([n, { n }])).toBe(`[${text},{"n":${text}}]`);
      }),
      { numRuns: 1000 },
    );
  });

  it('refuses what JSON cannot carry rather than writing something else (NaN, ±Infinity)', () => {
    for (const bad of [NaN, Infinity, -Infinity]) {
      expect(() => canonicalJson(bad)).toThrow();
      expect(() => canonicalJson({ a: [bad] })).toThrow();
    }
  });

  it('hashes are sha256 of the canonical text', () => {
    fc.assert(fc.property(jsonValue, (v) => {
      expect(canonicalHash(v)).toBe(sha256Hex(canonicalJson(v)));
    }), { numRuns: 100 });
  });

  it('is I-JSON: what it writes of a well-formed value has no problem textProblem finds (D §1, D §10)', () => {
    fc.assert(fc.property(jsonValue, (v) => {
      expect(textProblem(canonicalJson(v))).toBeNull();
    }), RUNS);
  });
});

describe('base64url (D §1: RFC 4648 §5, no padding, canonical)', () => {
  it('changing any one character of an encoding either fails to decode or decodes to other bytes', () => {
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/ .';
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 64 }), fc.nat(), fc.constantFrom(...alphabet), (bytes, at, c) => {
        const text = encodeBase64url(bytes);
        const i = at % text.length;
        if (text[i] === c) return;
        const changed = text.slice(0, i) + c + text.slice(i + 1);
        const back = decodeBase64url(changed);
        if (back !== null) expect(Buffer.compare(back, Buffer.from(bytes))).not.toBe(0);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('strict UTF-8 (D §3: a payload that is not UTF-8 is token_malformed)', () => {
  it('decodes the UTF-8 of every well-formed string back to it, a leading BOM included', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme-composite', maxLength: 30 }), fc.boolean(), (s, bom) => {
        const text = bom ? `\ufeff${s}` : s;
        expect(decodeUtf8Strict(Buffer.from(text, 'utf8'))).toBe(text);
      }),
      RUNS,
    );
  });

  it('accepts exactly the byte strings that are valid UTF-8 (what re-encodes to the same bytes)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 24 }), (bytes) => {
        const buf = Buffer.from(bytes);
        const valid = Buffer.from(buf.toString('utf8'), 'utf8').equals(buf);
        const text = decodeUtf8Strict(buf);
        if (valid) expect(text).toBe(buf.toString('utf8'));
        else expect(text).toBeNull();
      }),
      { numRuns: 1000 },
    );
  });
});

/** Text with many surrogate pairs and lone surrogates, so cuts land on them often. */
const unitText = fc.array(fc.constantFrom('a', 'é', '😀', '\ud83d', '\ude00', '\u202e', '~', '/'), { maxLength: 20 }).map((xs) => xs.join(''));

describe('cutText and shortened (the cut never leaves half a surrogate pair)', () => {
  it('gives a prefix of at most max units, at most one shorter, and never ends inside a pair it cut', () => {
    fc.assert(
      fc.property(unitText, fc.integer({ min: -2, max: 45 }), (s, max) => {
        const cut = cutText(s, max);
        expect(s.startsWith(cut)).toBe(true);
        if (s.length <= max) {
          expect(cut).toBe(s);
          return;
        }
        expect(cut.length).toBeLessThanOrEqual(Math.max(0, max));
        expect(cut.length).toBeGreaterThanOrEqual(Math.max(0, max - 1));
        // The cut splits no pair: it does not end on a high surrogate followed by a low one.
        const last = cut.charCodeAt(cut.length - 1);
        const next = s.charCodeAt(cut.length);
        expect(last >= 0xd800 && last <= 0xdbff && next >= 0xdc00 && next <= 0xdfff).toBe(false);
        // A well-formed text stays well formed.
        if (!hasLoneSurrogate(s)) expect(hasLoneSurrogate(cut)).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });

  it('shortened marks a cut text with … and leaves text up to the limit alone', () => {
    fc.assert(
      fc.property(unitText, fc.integer({ min: 0, max: 45 }), (s, max) => {
        const out = shortened(s, max);
        if (s.length <= max) expect(out).toBe(s);
        else expect(out).toBe(`${cutText(s, max)}…`);
      }),
      RUNS,
    );
  });
});

/** RFC 6901 §4: a reference token decoded (`~1` → `/` first, then `~0` → `~`). */
function unescapeToken(token: string): string {
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}

describe('JSON pointer tokens (RFC 6901; D §10 details.path)', () => {
  it('a token decodes back to its key, and holds no / and no ~ but in ~0 and ~1', () => {
    fc.assert(
      fc.property(fc.oneof(unitText, fc.string({ maxLength: 12 }), fc.nat()), (key) => {
        const token = pointerToken(key);
        expect(unescapeToken(token)).toBe(String(key));
        expect(token).not.toContain('/');
        expect(token.replace(/~[01]/g, '')).not.toContain('~');
      }),
      { numRuns: 1000 },
    );
  });
});

/** A JSON value whose strings may hold lone surrogates (what arrives from a model or a tool). */
const rawString = fc.string({ unit: 'binary', maxLength: 8 });
const rawValue: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { maxDepth: 3, depthSize: 'small' },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.oneof(rawString, unitText),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(rawString, unitText), tie('value'), { maxKeys: 4 }),
  ),
})).value;

describe('wellFormedJson and visibleJson (what clients send svcd; what a terminal shows)', () => {
  it('wellFormedJson writes JSON with no lone surrogate, equal to JSON.stringify where there was none', () => {
    fc.assert(
      fc.property(rawValue, (v) => {
        const text = wellFormedJson(v);
        const back = JSON.parse(text) as unknown;
        expect(textProblem(text)).toBeNull();
        expect(hasLoneSurrogate(JSON.stringify(back))).toBe(false);
        if (!hasLoneSurrogate(JSON.stringify(v)) && !/\\ud[89a-f]/.test(JSON.stringify(v))) expect(text).toBe(JSON.stringify(v));
      }),
      RUNS,
    );
  });

  it('visibleJson is the same JSON, with no control, format or separator character left raw', () => {
    fc.assert(
      fc.property(rawValue, (v) => {
        const json = JSON.stringify(v);
        const shown = visibleJson(json);
        expect(JSON.parse(shown)).toEqual(JSON.parse(json));
        expect(/[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}]/u.test(shown)).toBe(false);
        if (typeof v === 'string') expect(JSON.parse(quoted(v))).toBe(v);
      }),
      RUNS,
    );
  });
});

/** A reference jsonDepth over the parsed value. */
function depthOf(v: unknown): number {
  if (v === null || typeof v !== 'object') return 0;
  const inner = Array.isArray(v) ? v : Object.values(v);
  return 1 + Math.max(0, ...inner.map(depthOf));
}

describe('nesting limits (D §10 no input yields a 500; D §3 payload deeper than 32)', () => {
  it('jsonDepth of any JSON text is the depth of the value it parses to', () => {
    fc.assert(
      fc.property(rawValue, (v) => {
        const text = JSON.stringify(v, null, 1);
        expect(jsonDepth(text)).toBe(depthOf(JSON.parse(text)));
      }),
      RUNS,
    );
  });

  it('bodyProblem finds a problem exactly when a value is nested deeper than max or a number is not finite, and names a path to it', () => {
    const withBad = fc.letrec((tie) => ({
      value: fc.oneof(
        { maxDepth: 5, depthSize: 'small' },
        fc.constantFrom<unknown>(null, 1, 'x', Infinity, -Infinity, NaN),
        fc.array(tie('value'), { maxLength: 3 }),
        fc.dictionary(fc.constantFrom('a', 'b', '0', '1', 'a/b', '~'), tie('value'), { maxKeys: 3 }),
      ),
    })).value;
    fc.assert(
      fc.property(withBad, fc.integer({ min: 1, max: 5 }), (v, max) => {
        const problem = bodyProblem(v, max);
        const finite = (x: unknown): boolean => (typeof x === 'number' ? Number.isFinite(x) : x === null || typeof x !== 'object' ? true : (Array.isArray(x) ? x : Object.values(x)).every(finite));
        const expected = depthOf(v) > max || !finite(v);
        expect(problem !== null).toBe(expected);
        if (!problem) return;
        // The path names a value that is itself the problem.
        let at: unknown = v;
        let depth = at !== null && typeof at === 'object' ? 1 : 0;
        for (const token of problem.path.split('/').slice(1).map(unescapeToken)) {
          at = (at as Record<string, unknown>)[token];
          if (at !== null && typeof at === 'object') depth++;
        }
        expect(depth > max || (typeof at === 'number' && !Number.isFinite(at))).toBe(true);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('JSON escapes undone (the redactor and data boundary see what escapes spell)', () => {
  it('undoes exactly what JSON.parse undoes in a JSON string body', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 20 }), (s) => {
        const body = JSON.stringify(s).slice(1, -1);
        const once = unescapeOnce(body);
        expect(once ?? body).toBe(s);
      }),
      { numRuns: 1000 },
    );
  });

  it('maps every character of the result to the span of the text it came from', () => {
    const escapy = fc.array(fc.constantFrom('a', '\\', 'u', '0', '0', '4', '1', 'n', '"', '/', 'é', '\\u00e9', '\\n', '\\\\'), { maxLength: 16 }).map((xs) => xs.join(''));
    fc.assert(
      fc.property(escapy, (text) => {
        const { text: out, from } = unescapeMapped(text);
        expect(from.length).toBe(out.length + 1);
        expect(from[0]).toBe(0);
        expect(from[out.length]).toBe(text.length);
        for (let i = 0; i < out.length; i++) {
          expect(from[i + 1]!).toBeGreaterThan(from[i]!);
          // Each character's span undoes, on its own, to that character.
          const span = text.slice(from[i], from[i + 1]);
          expect(unescapeOnce(span) ?? span).toBe(out[i]);
        }
      }),
      { numRuns: 1000 },
    );
  });
});

/** A JSON document written member by member (names may repeat), strings of any UTF-16 units. */
type Doc = { o: Array<[string, Doc]> } | { a: Doc[] } | { s: string } | { n: number };
const docString = fc.oneof(fc.constantFrom('a', 'b', '~', '/', 'é', '\ud800', '\udc00x', '😀', 'a"b', '\\'), fc.string({ unit: 'binary', maxLength: 3 }));
const { doc } = fc.letrec<{ doc: Doc }>((tie) => ({
  doc: fc.oneof(
    { depthSize: 'small', maxDepth: 4 },
    fc.record({ s: docString }),
    fc.record({ n: fc.oneof(fc.integer(), fc.constantFrom(9007199254740993, 0.5)) }),
    fc.record({ a: fc.array(tie('doc'), { maxLength: 4 }) }),
    fc.record({ o: fc.array(fc.tuple(docString, tie('doc')), { maxLength: 4 }) }),
  ),
}));
const space = fc.constantFrom('', ' ', '\n', '\t ');

/** The document as JSON text with `ws()` between tokens; names and strings escaped as JSON.stringify does, or with \u escapes. */
function writeDoc(d: Doc, ws: () => string, escape: () => boolean): string {
  const str = (s: string) => (escape() ? `"${[...s].map((c) => Array.from({ length: c.length }, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, '0')}`).join('')).join('')}"` : JSON.stringify(s));
  if ('o' in d) return `{${ws()}${d.o.map(([k, v]) => `${str(k)}${ws()}:${ws()}${writeDoc(v, ws, escape)}`).join(`${ws()},${ws()}`)}${ws()}}`;
  if ('a' in d) return `[${ws()}${d.a.map((v) => writeDoc(v, ws, escape)).join(`${ws()},${ws()}`)}${ws()}]`;
  if ('s' in d) return str(d.s);
  return d.n === 9007199254740993 ? '9007199254740993' : String(d.n);
}

/** The first problem in document order, as RFC 7493 sees it: its JSON pointer, or null. */
function firstProblem(d: Doc, path: string[] = []): string | null {
  const here = (p: string[]) => p.map((t) => `/${pointerToken(t)}`).join('');
  if ('s' in d) return hasLoneSurrogate(d.s) ? here(path) : null;
  if ('n' in d) return d.n === 9007199254740993 ? here(path) : null;
  if ('a' in d) {
    for (let i = 0; i < d.a.length; i++) {
      const p = firstProblem(d.a[i]!, [...path, String(i)]);
      if (p !== null) return p;
    }
    return null;
  }
  const seen = new Set<string>();
  for (const [k, v] of d.o) {
    if (hasLoneSurrogate(k) || seen.has(k)) return here([...path, k]);
    seen.add(k);
    const p = firstProblem(v, [...path, k]);
    if (p !== null) return p;
  }
  return null;
}

describe('textProblem names the first place a body is not I-JSON (D §1, D §10 details.path)', () => {
  it('finds the first repeated name, lone surrogate or inexact integer in document order, whatever the whitespace and escapes', () => {
    fc.assert(
      fc.property(doc, fc.array(space, { minLength: 1, maxLength: 8 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }), (d, spaces, escapes) => {
        let i = 0;
        let j = 0;
        const text = writeDoc(
          d,
          () => spaces[i++ % spaces.length]!,
          () => escapes[j++ % escapes.length]!,
        );
        JSON.parse(text);
        const problem = textProblem(text);
        const expected = firstProblem(d);
        expect(problem?.path ?? null).toBe(expected === null ? null : shortened(expected, 1024));
      }),
      { numRuns: 1000 },
    );
  });
});
