/**
 * Small kernel cores as properties: ids sort by creation (D §1), list cursors are opaque and
 * round-trip (D §6), and the retry delay follows D §6's formula with ±20 % jitter.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { SvcError } from '../../src/errors.js';
import { ID_PREFIXES, isId, newId, type IdKind } from '../../src/ids.js';
import { decodeCursor, encodeCursor } from '../../src/kernel/cursor.js';
import { RETRY_DEFAULTS, retryDelayMs, retryPolicy } from '../../src/kernel/retry.js';

const MAX_ULID_MS = 2 ** 48 - 1;

describe('ids (D §1: a type prefix plus a time-sortable ULID; sorting ids sorts by creation)', () => {
  it('ids made one after another are well formed and strictly increasing, whatever the clock reads (also when it goes back)', () => {
    fc.assert(
      fc.property(fc.constantFrom(...(Object.keys(ID_PREFIXES) as IdKind[])), fc.array(fc.oneof(fc.integer({ min: 0, max: MAX_ULID_MS }), fc.double({ min: 0, max: MAX_ULID_MS, noNaN: true })), { minLength: 1, maxLength: 20 }), (kind, times) => {
        const ids = times.map((ms) => newId(kind, ms));
        for (const id of ids) expect(isId(kind, id), id).toBe(true);
        for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!, `${ids[i - 1]} < ${ids[i]}`).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('an id made at a later millisecond sorts after one made earlier', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_ULID_MS - 1 }), fc.integer({ min: 1, max: 1e6 }), (ms, later) => {
        const a = newId('run', ms);
        const b = newId('run', Math.min(MAX_ULID_MS, ms + later));
        expect(a.slice(4, 14) < b.slice(4, 14) || a < b).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});

describe('list cursors (D §6: `after` and `next` are opaque)', () => {
  it('round-trip every id a list can end on', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 64 }), (id) => {
        expect(decodeCursor(encodeCursor(id))).toBe(id);
      }),
      { numRuns: 500 },
    );
  });

  it('anything else is 400 request_invalid naming the parameter, never another error', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 40 }), fc.base64String({ maxLength: 40 }), fc.jsonValue({ maxDepth: 2 }).map((v) => Buffer.from(JSON.stringify(v)).toString('base64url'))), (text) => {
        let id: string | null = null;
        try {
          id = decodeCursor(text, 'after');
        } catch (err) {
          expect(err).toBeInstanceOf(SvcError);
          expect((err as SvcError).code).toBe('request_invalid');
          expect((err as SvcError).details).toEqual({ path: '/querystring/after' });
          return;
        }
        expect(encodeCursor(id)).toBe(text);
      }),
      { numRuns: 500 },
    );
  });
});

describe('retry delay (D §6: min(max_delay, initial_delay × 2^(attempt−1)) with ±20 % jitter)', () => {
  it('is within 20 % of the formula, never negative, and exact without jitter', () => {
    const policy = fc.record({ max_attempts: fc.integer({ min: 1, max: 100 }), initial_delay_ms: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 3_600_000 })), max_delay_ms: fc.oneof(fc.constant(0), fc.integer({ min: 0, max: 86_400_000 })) });
    fc.assert(
      fc.property(policy, fc.integer({ min: 1, max: 5000 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (p, attempt, r) => {
        const base = Math.min(p.max_delay_ms, p.initial_delay_ms === 0 ? 0 : p.initial_delay_ms * 2 ** (attempt - 1));
        const d = retryDelayMs(p, attempt, () => r);
        expect(Number.isInteger(d)).toBe(true);
        expect(d).toBeGreaterThanOrEqual(Math.floor(base * 0.8));
        expect(d).toBeLessThanOrEqual(Math.ceil(base * 1.2));
        expect(retryDelayMs(p, attempt, () => 0.5)).toBe(Math.round(base));
      }),
      { numRuns: 1000 },
    );
  });

  it('the policy takes the defaults for anything missing or malformed (D §4, §6)', () => {
    fc.assert(
      fc.property(fc.record({ max_attempts: fc.anything(), initial_delay_ms: fc.anything(), max_delay_ms: fc.anything() }, { requiredKeys: [] }), (r) => {
        const p = retryPolicy(r as never);
        expect(Number.isInteger(p.max_attempts) && p.max_attempts >= 1).toBe(true);
        for (const k of ['initial_delay_ms', 'max_delay_ms'] as const) expect(Number.isFinite(p[k]) && p[k] >= 0).toBe(true);
        if (r.max_attempts === undefined) expect(p.max_attempts).toBe(RETRY_DEFAULTS.max_attempts);
      }),
      { numRuns: 300 },
    );
  });
});

describe('counterexamples found by the properties above', () => {
  it('an id made at a fraction of a millisecond is well formed (it held "undefined")', async () => {
    // A fresh module: ids made above moved its last time past any time asked for here.
    vi.resetModules();
    const ids = await import('../../src/ids.js');
    const id = ids.newId('lease', 9.886009339980781e-20);
    expect(ids.isId('lease', id), id).toBe(true);
    expect(ids.isId('run', ids.newId('run', Date.parse('2026-11-22T10:00:00.000Z') + 0.5))).toBe(true);
  });

  it('a retry delay with no initial delay is 0 at any attempt (it was NaN from attempt 1025)', () => {
    expect(retryDelayMs({ max_attempts: 1, initial_delay_ms: 0, max_delay_ms: 0 }, 1025, () => 0)).toBe(0);
    expect(retryDelayMs({ max_attempts: 1, initial_delay_ms: 1000, max_delay_ms: 60_000 }, 5000, () => 0.5)).toBe(60_000);
  });
});
