// settledWithin (src/util/settled-within.ts): how a promise stood when a bounded wait for it
// ended. The gateway uses it for a write's late answer and for an event's delivery.
import { describe, expect, it } from 'vitest';
import { settledWithin } from '../../src/util/settled-within.js';

describe('settledWithin', () => {
  it('says fulfilled with the value, rejected with the reason, or pending at the bound; never rejects itself', async () => {
    expect(await settledWithin(Promise.resolve(7), 50)).toEqual({ state: 'fulfilled', value: 7 });
    const boom = new Error('boom');
    expect(await settledWithin(Promise.reject(boom), 50)).toEqual({ state: 'rejected', reason: boom });
    const t0 = Date.now();
    expect(await settledWithin(new Promise(() => {}), 60)).toEqual({ state: 'pending' });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(55);
    const late = new Promise((resolve) => setTimeout(() => resolve('late'), 30));
    expect(await settledWithin(late, 1000)).toEqual({ state: 'fulfilled', value: 'late' });
  });
});
