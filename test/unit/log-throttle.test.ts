/** LogThrottle: `burst` lines per key per window, the held-back ones counted for the next line. */
import { describe, expect, it } from 'vitest';
import { LogThrottle } from '../../src/log/throttle.js';

describe('LogThrottle', () => {
  it('lets one line per key through each window and reports how many it held back', () => {
    const t = new LogThrottle(10_000);
    expect(t.pass('SQLITE_FULL', 0)).toBe(0);
    for (let i = 0; i < 99; i++) expect(t.pass('SQLITE_FULL', 1 + i)).toBeNull();
    expect(t.pass('SQLITE_IOERR', 500)).toBe(0); // another key has its own window
    expect(t.pass('SQLITE_FULL', 9_999)).toBeNull();
    expect(t.pass('SQLITE_FULL', 10_000)).toBe(100);
    expect(t.pass('SQLITE_FULL', 20_000)).toBe(0);
  });

  it('lets a burst through per window, then counts until the next window', () => {
    const t = new LogThrottle(10_000, 3);
    expect([0, 1, 2].map((i) => t.pass('refused', i))).toEqual([0, 0, 0]);
    expect(t.pass('refused', 3)).toBeNull();
    expect(t.pass('refused', 4)).toBeNull();
    expect(t.pass('refused', 10_000)).toBe(2);
    expect(t.pass('refused', 10_001)).toBe(0);
  });

  it('remembers a bounded number of keys', () => {
    const t = new LogThrottle(10_000, 1, 3);
    for (const k of ['a', 'b', 'c']) expect(t.pass(k, 0)).toBe(0);
    expect(t.pass('d', 1)).toBe(0); // forgets the others
    expect(t.pass('a', 2)).toBe(0);
  });
});
