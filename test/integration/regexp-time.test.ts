/**
 * Patterns on callers' input run in linear time (src/util/regexp-guard.ts,
 * src/util/linear-regexp.ts; docs/design.md "Regular expressions"): a policy's `matches`
 * (D 5.1, CEL's RE2 semantics) and a workflow's `pattern` (I 4.1 rule 2). `^([a-z]+)+$` on
 * thirty letters and a `!` backtracks for over a minute in the JS RegExp; here each request
 * must answer correctly long before the test's timeout.
 */
import { performance } from 'node:perf_hooks';
import { describe, expect, it } from 'vitest';
import { propose, pushBundle, pushPolicy, refundsBundle, runToAction, startRunDaemon, mintRemit } from './run-fixtures.js';

const EVIL = '^([a-z]+)+$';
const ATTACK = 'a'.repeat(30) + '!';

async function timed<T>(f: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const t0 = performance.now();
  const value = await f();
  return { value, ms: performance.now() - t0 };
}

describe('patterns on worker and caller input cannot stall the kernel', () => {
  it("a policy's matches() decides a proposal at once (D 5.1), and /policies/test too (D 5.3)", async () => {
    await using d = await startRunDaemon();
    await pushPolicy(d, 'slugs', '1', `deny bad_slug\n  when has(action.args.slug) && !action.args.slug.matches("${EVIL}")\n`);
    const { lease } = await runToAction(d, { policy_set: ['slugs'] });
    const { value: res, ms } = await timed(() => propose(d, lease.lease_id, { tool: 'billing.refund', args: { amount: 5, slug: ATTACK } }));
    expect(res.status).toBe(403);
    expect(res.body.error).toMatchObject({ code: 'action_denied' });
    expect(ms).toBeLessThan(5000);

    const corpus = [{ action: { tool: 'billing.refund', args: { slug: ATTACK } }, run: {} }, { action: { tool: 'billing.refund', args: { slug: 'fine' } }, run: {} }];
    const test = await timed(() => d.kernel_('/policies/test', { body: { policy_a: { name: 'slugs', version: '1' }, policy_b: { source: `allow any\n  when action.tool.matches("${EVIL}")\n` }, corpus } }));
    expect(test.value.status).toBe(200);
    expect(test.value.body.flips.map((f: { index: number }) => f.index)).toEqual([0]);
    expect(test.ms).toBeLessThan(5000);
  });

  it('a workflow input pattern refuses the attack string at once with input_invalid (I 4.1 rule 2)', async () => {
    await using d = await startRunDaemon();
    const bundle = refundsBundle();
    bundle.workflows.refund!.input_schema = { type: 'object', required: ['invoice_id'], properties: { invoice_id: { type: 'string', pattern: EVIL } } };
    const bundleId = await pushBundle(d, bundle);
    const remit = await mintRemit(d);
    const body = { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: ATTACK }, remit_id: remit.remit_id, requested_by: { id: 'ana', role: 'agent', manager: 'finance' } };
    const { value: res, ms } = await timed(() => d.kernel_('/runs', { body }));
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('input_invalid');
    expect(ms).toBeLessThan(5000);
    const ok = await d.kernel_('/runs', { body: { ...body, input: { invoice_id: 'abc' } } });
    expect(ok.status).toBe(201);
  });
});
