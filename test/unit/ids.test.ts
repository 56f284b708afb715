/**
 * Ids (decisions §1): a type prefix plus a ULID whose first ten characters are the
 * millisecond time, monotonic within a millisecond, so that sorting ids sorts by creation.
 */
import { describe, expect, it } from 'vitest';
import { ID_PREFIXES, isId, newId, ulid } from '../../src/ids.js';

const CROCKFORD = /^[0-9A-HJKMNP-TV-Z]{26}$/;

describe('ids (decisions §1)', () => {
  it('is the kind prefix plus 26 Crockford base32 characters', () => {
    for (const kind of Object.keys(ID_PREFIXES) as Array<keyof typeof ID_PREFIXES>) {
      const id = newId(kind);
      expect(id.startsWith(ID_PREFIXES[kind])).toBe(true);
      expect(id.slice(ID_PREFIXES[kind].length)).toMatch(CROCKFORD);
      expect(isId(kind, id)).toBe(true);
    }
    expect(isId('run', newId('lease'))).toBe(false);
    expect(isId('run', 'run_not-a-ulid')).toBe(false);
  });

  it('encodes the time in the first ten characters, so ids sort by creation time', () => {
    // 32^9 ms = 35184372088832: the first character is 1, the other nine are 0.
    expect(ulid(35_184_372_088_832).slice(0, 10)).toBe('1000000000');
    expect(ulid(35_184_372_088_833).slice(0, 10)).toBe('1000000001');
    // A clock that steps back does not make ids go back: the last time is kept.
    const back = ulid(1_700_000_000_000);
    expect(back.slice(0, 10)).toBe('1000000001');
  });

  it('is strictly increasing within one millisecond and across the random pool refills', () => {
    // 1,000 ids in one millisecond draw from the pool once; 10,000 fresh milliseconds refill it
    // many times over (4 KiB pool, 16 bytes an id).
    const ms = 40_000_000_000_000; // after the times used above
    const burst = Array.from({ length: 1000 }, () => ulid(ms));
    for (let i = 1; i < burst.length; i++) expect(burst[i]! > burst[i - 1]!).toBe(true);
    const spread = Array.from({ length: 10_000 }, (_, i) => ulid(ms + 1 + i));
    for (let i = 1; i < spread.length; i++) expect(spread[i]! > spread[i - 1]!).toBe(true);
    expect(new Set(spread.map((id) => id.slice(10))).size).toBe(spread.length); // random parts differ
  });

  it('draws every random character from the whole alphabet', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) for (const c of ulid(50_000_000_000_000 + i).slice(10)) seen.add(c);
    expect(seen.size).toBe(32);
  });
});
