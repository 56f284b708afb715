/** Byte-bounded pages (GET /v1/runs, GET /v1/runs/{id}/events; svcd(8) LIMITS): how many rows fit. */
import { describe, expect, it } from 'vitest';
import { rowsWithin } from '../../src/kernel/cursor.js';

describe('rowsWithin', () => {
  it('holds the leading rows until their sizes pass the bound, and always one when there is any', () => {
    expect(rowsWithin([], 10)).toBe(0);
    expect(rowsWithin([50], 10)).toBe(1);
    expect(rowsWithin([3, 3, 3], 6)).toBe(2);
    expect(rowsWithin([3, 3, 3], 9)).toBe(3);
    expect(rowsWithin([3, 20, 1], 10)).toBe(1);
  });
});
