/**
 * Interface 2.10 ("the substituted value never appears in logs, responses or events"), at the
 * level of the matcher every redaction goes through (src/log/secret-matcher.ts) and the
 * Redactor's header-name path (src/log/logger.ts): the edges of its design, a spelling cut at the
 * automaton's depth, letters folded, secrets added after it was built (docs/design.md, Secrets).
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretMatcher } from '../../src/log/secret-matcher.js';
import { Redactor } from '../../src/log/logger.js';
import { registerSecret } from '../../src/log/secret-spellings.js';

/** `n` code units no two alike in a row, letters and digits (a spelling's own characters). */
const spelling = (n: number, seed = 'k'): string => Array.from({ length: n }, (_, i) => 'aB3dE5gH7jK9mN1pQ2sT4vW6yZ8'[(i + seed.charCodeAt(0)) % 27]).join('');

describe('SecretMatcher: spellings longer than the automaton holds (I 2.10)', () => {
  for (const n of [31, 32, 33, 64, 3000]) {
    it(`a spelling of ${n} units: found whole, not when one unit past the trie differs, found at the end of a text`, () => {
      const s = spelling(n);
      const m = new SecretMatcher();
      m.add(s, false);
      expect(m.spans(`x${s}y`)).toEqual([[1, n + 1]]);
      expect(m.spans(`xx${s}`)).toEqual([[2, n + 2]]);
      // The last unit changed: the text spells no secret, whatever the trie holds.
      expect(m.spans(s.slice(0, -1) + '#')).toEqual([]);
      expect(m.test(s.slice(0, -1))).toBe(false);
      expect(m.test(`--${s}--`)).toBe(true);
    });
  }

  it('a spelling in its own case is not found in another past the trie; one in any case is, and only so', () => {
    const s = spelling(40);
    const own = new SecretMatcher();
    own.add(s, false);
    expect(own.test(s.slice(0, 35) + s.slice(35).toUpperCase())).toBe(s.slice(35) === s.slice(35).toUpperCase());
    expect(own.test(s.toLowerCase())).toBe(false);
    const any = new SecretMatcher();
    any.add(s, true);
    expect(any.spans(`<${s.toUpperCase()}>`)).toEqual([[1, 41]]);
    expect(any.spans(s.slice(0, 35) + s.slice(35).toLowerCase())).toEqual([[0, 40]]);
    // Past the trie, a different letter (not a case variant) is no match.
    expect(any.test(s.slice(0, 39) + (s[39] === 'Q' ? 'R' : 'Q'))).toBe(false);
  });

  it('a spelling that starts inside a longer one, and overlapping hits, are all reported', () => {
    const long = spelling(45);
    const inner = long.slice(10, 44);
    const m = new SecretMatcher();
    m.add(long, false);
    m.add(inner, true);
    expect(m.spans(long).sort((a, b) => a[0] - b[0])).toEqual([[0, 45], [10, 44]]);
  });

  it('letters whose upper case is two units (ß) and astral characters: matched as registered, not lost', () => {
    const m = new SecretMatcher();
    m.add('straße-Schlüssel', true);
    m.add('\u{1F511}key-\u{10428}\u{10429}-42', true);
    expect(m.test('STRASSE-SCHLÜSSEL')).toBe(false); // ß → SS is registered by secret-spellings.ts, not folded
    expect(m.test('Straße-schlüssel')).toBe(true);
    expect(m.test('STRAẞE-SCHLÜSSEL')).toBe(true); // capital sharp s folds to ß
    expect(m.spans('a\u{1F511}KEY-\u{10428}\u{10429}-42')).toEqual([[1, 14]]);
  });

  it('a spelling added after the automaton was built is found (a secret registered while requests are served)', () => {
    const m = new SecretMatcher();
    m.add('first-secret', false);
    expect(m.test('second-secret')).toBe(false);
    m.add('second-secret', false);
    expect(m.test('the second-secret here')).toBe(true);
    // A spelling registered again in any case: it now is.
    m.add('first-secret', true);
    expect(m.test('FIRST-SECRET')).toBe(true);
  });
});

describe('Redactor.redactLowerCased: a header name (I 2.10)', () => {
  it('a short secret that is part of another: the longer one is replaced whole, nothing of it left', () => {
    const r = new Redactor();
    // Both under 8 bytes: matched in their own case only, lower-cased only in header names.
    r.add('Admin');
    r.add('Admin-7x');
    expect(r.redactLowerCased('x-admin-7x')).toBe('x-[REDACTED]');
    expect(r.redactLowerCased('x-admin-y')).toBe('x-[REDACTED]-y');
  });

  it('costs microseconds a name with 50 secrets, PEM keys among them (every header name of every http answer)', () => {
    const r = new Redactor();
    for (let i = 0; i < 5; i++) registerSecret(r, `-----BEGIN PRIVATE KEY-----\n${randomBytes(1200).toString('base64')}\n-----END PRIVATE KEY-----\n`);
    for (let i = 0; i < 45; i++) registerSecret(r, `tok_${randomBytes(18).toString('base64url')}`);
    const names = ['content-type', 'x-request-id', 'cache-control', 'date', 'server', 'content-length', 'vary', 'etag', 'x-ratelimit-remaining', 'strict-transport-security'];
    r.redactLowerCased('warm-up');
    let best = Infinity;
    for (let k = 0; k < 3; k++) {
      const t = performance.now();
      for (let j = 0; j < 10; j++) for (const name of names) expect(r.redactLowerCased(name)).toBe(name);
      best = Math.min(best, performance.now() - t);
    }
    // Every spelling lower-cased for each name, 100 names took some 100 ms; lower-cased once, 1.
    expect(best).toBeLessThan(30);
  });

  it('two secrets overlapping in a header name: one span, neither half left', () => {
    const r = new Redactor();
    r.add('Key-ab');
    r.add('ab-Qrs');
    expect(r.redactLowerCased('key-ab-qrs')).toBe('[REDACTED]');
  });
});

describe('registerSecret: any letter case from 8 characters, not 8 bytes (I 2.10; docs/design.md, Secrets)', () => {
  it('a 4-letter Cyrillic name (8 bytes) is not redacted in its other case, a word as often as `Admin`; its base64 still is', () => {
    const r = new Redactor();
    registerSecret(r, 'Иван');
    expect(r.redact('user Иван')).toBe('user [REDACTED]');
    expect(r.redact('ИВАН иван')).toBe('ИВАН иван');
    expect(r.redact(Buffer.from('Иван').toString('base64'))).toMatch(/^\[REDACTED\]/);
    // 8 characters: any case, as for ASCII.
    const long = new Redactor();
    registerSecret(long, 'Иван-1234');
    expect(long.redact('ИВАН-1234')).toBe('[REDACTED]');
  });
});

describe('SecretMatcher: a hostile text costs about what any text does (docs/design.md, Secrets)', () => {
  it('many copies of the public prefix PEM keys share, in any spelling (UTF-32 above all): no full comparison per key at each', () => {
    const r = new Redactor();
    const prefix = '-----BEGIN PRIVATE KEY-----\nMIIEv';
    for (let i = 0; i < 5; i++) registerSecret(r, `${prefix}${randomBytes(1200).toString('base64').replace(/.{64}/g, '$&\n')}\n-----END PRIVATE KEY-----\n`);
    const fastest = (text: string) => {
      r.redact(text);
      let best = Infinity;
      for (let k = 0; k < 3; k++) {
        const t = performance.now();
        r.redact(text);
        best = Math.min(best, performance.now() - t);
      }
      return best;
    };
    const size = 1 << 20;
    const ordinary = fastest(randomBytes((size * 3) / 4).toString('base64'));
    for (const unit of [prefix, [...prefix].join('\0\0\0') + '\0\0\0', [...prefix].join('\0') + '\0', prefix.toUpperCase()]) {
      const hostile = fastest(Buffer.from(unit.repeat(Math.ceil(size / unit.length))).toString());
      // Each key's spellings compared over the shared prefix at every copy, the UTF-32 one took
      // some 60 times as long as an ordinary text (240 ms a MiB); compared first at a character
      // of their own, 4 to 9 times.
      expect(hostile).toBeLessThan(Math.max(25 * ordinary, 150));
    }
  });
});
