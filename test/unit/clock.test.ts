/**
 * isoTime (decisions §1: ISO 8601 UTC with milliseconds) keeps its last answer; it must never
 * give one instant's text for another.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isoTime } from '../../src/clock.js';

describe('isoTime (D §1)', () => {
  it('is toISOString for every instant, asked once or over and over, in any order', () => {
    const instant = fc.integer({ min: 0, max: 4_102_444_800_000 });
    fc.assert(
      fc.property(fc.array(fc.oneof(instant, fc.constantFrom(0, 1, 1_763_805_600_000)), { minLength: 1, maxLength: 20 }), (times) => {
        for (const ms of times) {
          expect(isoTime(ms)).toBe(new Date(ms).toISOString());
          expect(isoTime(ms)).toBe(new Date(ms).toISOString());
        }
      }),
    );
  });

  it('refuses an instant that is not one, every time, and recovers after', () => {
    isoTime(5);
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
    expect(() => isoTime(9e15)).toThrow(RangeError);
    expect(isoTime(5)).toBe('1970-01-01T00:00:00.005Z');
    expect(isoTime(6)).toBe('1970-01-01T00:00:00.006Z');
  });
});
