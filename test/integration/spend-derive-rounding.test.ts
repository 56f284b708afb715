// Decisions §3 and 8.3 (a derive reserves from what the parent has left), docs/design.md
// "Spend" (the parent run goes on with what it kept): a parent run's usage is summed to the
// nano-dollar, and what it has used must come out of an inherited remainder rounded up.
import { describe, expect, it } from 'vitest';
import { getRun, lease, leaseAndComplete, pushBundle, startRun, startRunDaemon } from './run-fixtures.js';

describe('derive after sub-micro-dollar usage (D §3, 8.3)', () => {
  it('an inherited remainder leaves the parent run what it used, so it is not failed budget_exhausted', async () => {
    await using d = await startRunDaemon();
    const parent = await startRun(d, await pushBundle(d), { spend: { tokens: 1000, usd: 1 } });
    // 123 tokens at $0.15 per million: 0.00001845, a sum finer than a micro-dollar.
    await leaseAndComplete(d, { amount: 1 }, { tokens: 123, usd: 0.00001845 });
    const rest = await d.kernel_(`/remits/${parent.remit_id}/derive`, { body: {} });
    expect(rest.status).toBe(201);
    expect((await d.kernel_(`/remits/${rest.body.remit_id}`)).body.spend).toEqual({ tokens: 877, usd: 0.999981 });
    // The parent kept 0.000019 ≥ 0.00001845: its next step is handed out (usage not over).
    const next = await lease(d, ['tool']);
    expect(next.status).toBe(200);
    expect(next.body.run_id).toBe(parent.run_id);
    expect(next.body.context.budget).toEqual({ tokens: 123, usd: 0.000019, used_tokens: 123, used_usd: 0.00001845 });
    expect((await getRun(d, parent.run_id)).state).toBe('running');
    // Asking for exactly what is shown as available is also allowed, and nothing more.
    const p2 = await startRun(d, await pushBundle(d), { spend: { tokens: 1000, usd: 1 }, input: { invoice_id: 'inv-2' } });
    await leaseAndComplete(d, { amount: 1 }, { tokens: 0, usd: 0.00001845 });
    const over = await d.kernel_(`/remits/${p2.remit_id}/derive`, { body: { spend: { usd: 0.999982 } } });
    expect(over.status).toBe(422);
    expect(over.body.error.details.available).toEqual({ tokens: 1000, usd: 0.999981 });
    const exact = await d.kernel_(`/remits/${p2.remit_id}/derive`, { body: { spend: { usd: 0.999981 } } });
    expect(exact.status).toBe(201);
  });
});
