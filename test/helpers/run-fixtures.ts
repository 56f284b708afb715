/**
 * Payloads the reducer's tests start runs from: one shape, so a field added to
 * `run.created` is added here once.
 */

/** The three steps of the test run: a (model), b (action), c (tool). */
export const TEST_STEPS = ['a', 'b', 'c'] as const;

const KIND = { a: 'model', b: 'action', c: 'tool' } as const;

/** A `run.created` payload for run_1 of refunds@1.0.0; `compensate[i]` for step i (default: b and c). */
export function runCreatedPayload(compensate: readonly boolean[] = [false, true, true]): Record<string, unknown> {
  return {
    run_id: 'run_1',
    bundle_id: 'bnd_1',
    bundle: { name: 'refunds', version: '1.0.0' },
    workflow: 'refund',
    department: 'support',
    input: { invoice_id: 'inv-1' },
    requested_by: { id: 'ana', role: 'agent', manager: 'finance' },
    remit_id: 'rmt_1',
    parent_run_id: null,
    policies: [{ name: 'refunds', version: '1' }],
    budget: { tokens: 1000, usd: 1 },
    steps: TEST_STEPS.map((id, i) => ({ id, kind: KIND[id], compensate: compensate[i] ?? false })),
  };
}
