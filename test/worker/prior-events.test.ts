/**
 * A step that logged more than the lease context carries (decisions §6 "prior_events holds the
 * run's events from the step's first lease on"; docs/design.md "Lease context": the last
 * 1000): the kernel says where they start, and the worker reads the rest from the log before
 * the step runs, so its first recorded model answers are replayed and no write runs twice
 * (svc-worker(1)).
 */
import { describe, expect, it } from 'vitest';
import { KernelClient } from '../../src/worker/kernel-client.js';
import { completePriorEvents } from '../../src/worker/prior-events.js';
import { StepHistory } from '../../src/worker/step-history.js';
import type { Lease } from '../../src/worker/types.js';
import { lease, pushBundle, startRun, startRunDaemon } from '../integration/run-fixtures.js';

describe('prior_events past the context cap (D §6)', () => {
  it('the kernel cuts them to the last 1000 and names where they start; the worker reads the rest, and the first model answer is there', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const first = await lease(d, ['model']);
    const h = { 'x-svc-lease': first.body.lease_id };
    // The model's first answer, then 1,100 notes (a redaction note per value of a large read).
    const answer = { step: 'triage', lease_id: first.body.lease_id, call_index: 0, response: { content: null, calls: [{ id: 'c1', tool: 'billing.refund', args: { amount: 5 } }], usage: { tokens: 3, usd: 0 } }, source: 'worker' };
    expect((await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'model.called', payload: answer, actor: { worker_id: 'w' } }, headers: h })).status).toBe(201);
    for (let i = 0; i < 1100; i++) await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'note', payload: { i }, actor: { worker_id: 'w' } }, headers: h });
    await d.kernel_(`/leases/${first.body.lease_id}/fail`, { body: { error: { code: 'upstream_error', message: 'blip' } } });
    const again = await lease(d, ['model'], { wait_seconds: 5 });
    expect(again.body.attempt).toBe(2);
    const ctx = again.body.context;
    expect(ctx.prior_events).toHaveLength(1000);
    expect(ctx.prior_events_from_seq).toBe(first.body.context.prior_events_from_seq);
    expect(ctx.prior_events[0].seq).toBeGreaterThan(ctx.prior_events_from_seq);
    expect(StepHistory.from(ctx.prior_events, 'triage').modelCall(0)).toBeUndefined(); // what the cut lost

    const l = again.body as Lease;
    await completePriorEvents(new KernelClient({ baseUrl: d.kernelUrl! }), l);
    const events = l.context.prior_events;
    expect(events[0]!.seq).toBe(ctx.prior_events_from_seq);
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: events.length }, (_, i) => ctx.prior_events_from_seq + i));
    expect(events.at(-1)!.kind).toBe('step.retry_scheduled');
    expect(StepHistory.from(events, 'triage').modelCall(0)?.response.calls[0]).toMatchObject({ tool: 'billing.refund', args: { amount: 5 } });
  });

  it('a context that is whole is left alone (no request)', async () => {
    let asked = 0;
    const kernel = { events: async () => (asked++, { events: [], next_seq: 1 }) };
    const l = { run_id: 'run_x', context: { prior_events: [{ seq: 4, kind: 'step.leased', payload: {} }], prior_events_from_seq: 4 } } as unknown as Lease;
    await completePriorEvents(kernel, l);
    const firstLease = { run_id: 'run_x', context: { prior_events: [], prior_events_from_seq: 9 } } as unknown as Lease;
    await completePriorEvents(kernel, firstLease);
    const older = { run_id: 'run_x', context: { prior_events: [{ seq: 4, kind: 'x', payload: {} }] } } as unknown as Lease; // a kernel before prior_events_from_seq
    await completePriorEvents(kernel, older);
    // A compensation replays nothing, and its step's range runs through the rest of the run.
    const compensation = { run_id: 'run_x', kind: 'compensation', step_def: { kind: 'compensation' }, context: { prior_events: [{ seq: 2000, kind: 'x', payload: {} }], prior_events_from_seq: 4 } } as unknown as Lease;
    await completePriorEvents(kernel, compensation);
    expect(asked).toBe(0);
  });
});
