/**
 * Retrying compensations that failed for good (docs/design.md "Retrying compensations";
 * svcd(8) POST /runs/{id}/compensations/retry; svc-events(7) compensation.retry_requested),
 * against a real svcd over HTTP. Decisions §6 (abandon: compensations as `compensation`
 * leases, `abandoning` until they end, then `abandoned`) and §7 (the hash-chained log replay
 * checks); errors in the spec's envelope (decisions §10: 409 invalid_state).
 */
import { describe, expect, it } from 'vitest';
import type { Bundle } from '../../src/types.js';
import { allEvents, getRun, lease, leaseAndComplete, pushBundle, refundsBundle, startRun, startRunDaemon, type RunDaemon } from './run-fixtures.js';

const OPS = { id: 'ops-1', role: 'ops' } as const;

/** The refunds bundle with a step after the refund (so a run can be abandoned once the refund ran) and quick retries. */
function drillBundle(o: { lookupCompensates?: boolean } = {}): Bundle {
  const b = refundsBundle();
  b.tools!['billing.notify'] = { writes: false };
  b.tools!['billing.unlookup'] = { writes: true };
  const steps = b.workflows.refund!.steps;
  steps[2]!.retry = { max_attempts: 2, initial_delay_ms: 20, max_delay_ms: 20 };
  if (o.lookupCompensates) steps[1]!.compensate = { tool: 'billing.unlookup', args: { invoice_id: '{{input.invoice_id}}' } };
  steps.push({ id: 'notify', kind: 'tool', tool: 'billing.notify', args: {} });
  return b;
}

/** A run whose refund (rf-77) completed, abandoned by ops-1 before its last step. */
async function abandonedAfterRefund(d: RunDaemon, o: { lookupCompensates?: boolean } = {}): Promise<string> {
  const { run_id } = await startRun(d, await pushBundle(d, drillBundle(o)), { autonomy: 'autonomous' });
  await leaseAndComplete(d, { amount: 20 });
  await leaseAndComplete(d, { rows: 2 });
  await leaseAndComplete(d, { id: 'rf-77' });
  const ab = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'wrong customer', actor: OPS } });
  expect(ab.status).toBe(202);
  return run_id;
}

/** Leases the waiting compensation and fails it. */
async function failCompensation(d: RunDaemon, error: { code: string; message: string }, deterministic = false): Promise<any> {
  const c = await lease(d, ['compensation'], { wait_seconds: 5 });
  expect(c.status, JSON.stringify(c.body)).toBe(200);
  return (await d.kernel_(`/leases/${c.body.lease_id}/fail`, { body: { error, deterministic } })).body;
}

const retry = (d: RunDaemon, runId: string, body: unknown = { reason: 'billing upstream repaired', actor: OPS }) =>
  d.kernel_(`/runs/${runId}/compensations/retry`, { body });

async function replayChecksOut(d: RunDaemon, runId: string): Promise<void> {
  const r = await d.kernel_(`/runs/${runId}/replay`, { method: 'POST' });
  expect(r.status).toBe(200);
  expect(r.body).toMatchObject({ chain_valid: true, state_matches: true, chain_errors: [], state_differences: [], replay_error: null });
}

describe('retrying compensations that failed for good (docs/design.md; D §6, §7)', () => {
  it('the drill: the refund-void fails for good, billing is repaired, the operator retries, the run ends abandoned clean', async () => {
    await using d = await startRunDaemon();
    const runId = await abandonedAfterRefund(d);
    // Billing is down longer than the step's two attempts: the compensation is given up.
    expect(await failCompensation(d, { code: 'upstream_error', message: 'billing is down' })).toMatchObject({ outcome: 'retry_scheduled' });
    expect(await failCompensation(d, { code: 'upstream_error', message: 'billing is down' })).toMatchObject({ outcome: 'quarantined', run_state: 'abandoned' });
    const given = await getRun(d, runId);
    expect(given).toMatchObject({ state: 'abandoned', error: { code: 'compensation_failed' } });
    expect(given.steps.refund).toMatchObject({ state: 'failed', error: { code: 'upstream_error' } });

    // Billing is back: the retry, submitted twice (a double click, a client retrying on a timeout).
    const first = await retry(d, runId);
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    expect(first.body).toEqual({ run_id: runId, state: 'abandoning', compensations_scheduled: 1, steps: ['refund'] });
    const again = await retry(d, runId, { reason: 'clicked twice', actor: OPS });
    expect(again.status).toBe(202);
    expect(again.body).toEqual(first.body);
    const retrying = await getRun(d, runId);
    expect(retrying).toMatchObject({ state: 'abandoning', current_step: 'refund', error: null });
    expect(retrying.steps.refund.state).toBe('compensating');
    const requested = (await allEvents(d, runId)).filter((e) => e.kind === 'compensation.retry_requested');
    expect(requested).toHaveLength(1); // the repeat appended nothing
    expect(requested[0]).toMatchObject({ actor: OPS, payload: { reason: 'billing upstream repaired', steps: ['refund'], from_state: 'abandoned' } });
    expect((await d.kernel_('/metrics')).body).toMatch(/^svc_runs\{state="abandoning"\} 1$/m);

    // The compensation runs again from attempt 1, with the same rendered args, and completes.
    const c = await lease(d, ['compensation']);
    expect(c.body).toMatchObject({ run_id: runId, step: 'refund', kind: 'compensation', attempt: 1 });
    expect(c.body.step_def).toMatchObject({ tool: 'billing.void_refund', args: { refund_id: 'rf-77' } });
    expect((await d.kernel_(`/leases/${c.body.lease_id}/complete`, { body: { output: { voided: 'rf-77' } } })).body).toEqual({ run_state: 'abandoned', next_step: null });

    const done = await getRun(d, runId);
    expect(done).toMatchObject({ state: 'abandoned', current_step: null, error: null });
    expect(done.steps.refund.state).toBe('compensated');
    const events = await allEvents(d, runId);
    expect(events.slice(-4).map((e) => e.kind)).toEqual(['compensation.retry_requested', 'step.leased', 'compensation.completed', 'run.abandoned']);
    expect(events.at(-1)).toMatchObject({ payload: { reason: 'wrong customer', compensated: ['refund'], failed: [] } });
    expect(events.filter((e) => e.kind === 'run.abandoned')).toHaveLength(2); // one per round
    await replayChecksOut(d, runId);
    const metrics = (await d.kernel_('/metrics')).body;
    expect(metrics).toMatch(/^svc_runs\{state="abandoning"\} 0$/m);
    expect(metrics).toMatch(/^svc_events_total\{kind="compensation.retry_requested"\} 1$/m);

    // Nothing is left to retry; abandon still answers as the spec says for an abandoned run.
    const late = await retry(d, runId);
    expect(late.status).toBe(409);
    expect(late.body.error).toMatchObject({ code: 'invalid_state', details: { run_id: runId, state: 'abandoned' } });
    expect(late.body.error.message).toContain('nothing to retry');
    const ab = await d.kernel_(`/runs/${runId}/abandon`, { body: { reason: 'again', actor: OPS } });
    expect(ab.status).toBe(409);
    expect(ab.body.error.code).toBe('invalid_state');
  });

  it('a retried compensation that fails for good again ends the run compensation_failed again, and can be retried once more', async () => {
    await using d = await startRunDaemon();
    const runId = await abandonedAfterRefund(d);
    expect(await failCompensation(d, { code: 'refund_locked', message: 'locked' }, true)).toMatchObject({ outcome: 'quarantined', run_state: 'abandoned' });
    expect((await retry(d, runId, { actor: OPS })).status).toBe(202); // reason optional: recorded null
    expect(await failCompensation(d, { code: 'refund_locked', message: 'still locked' }, true)).toMatchObject({ run_state: 'abandoned' });
    const again = await getRun(d, runId);
    expect(again).toMatchObject({ state: 'abandoned', error: { code: 'compensation_failed', message: 'compensation failed for step(s) refund' } });
    expect((await allEvents(d, runId)).at(-1)).toMatchObject({ kind: 'run.abandoned', payload: { compensated: [], failed: ['refund'] } });
    const second = await retry(d, runId);
    expect(second.body).toMatchObject({ state: 'abandoning', steps: ['refund'] });
    const requested = (await allEvents(d, runId)).filter((e) => e.kind === 'compensation.retry_requested');
    expect(requested.map((e) => e.payload.reason)).toEqual([null, 'billing upstream repaired']);
    await leaseAndComplete(d, { voided: true }, undefined, ['compensation']);
    expect(await getRun(d, runId)).toMatchObject({ state: 'abandoned', error: null });
    await replayChecksOut(d, runId);
  });

  it('while other compensations still run, the given-up one joins the end of the queue (from_state abandoning)', async () => {
    await using d = await startRunDaemon();
    const runId = await abandonedAfterRefund(d, { lookupCompensates: true });
    // Last step first: the refund's compensation is given up, the lookup's is next.
    expect(await failCompensation(d, { code: 'gone', message: 'cannot void' }, true)).toMatchObject({ outcome: 'quarantined', run_state: 'abandoning' });
    expect(await getRun(d, runId)).toMatchObject({ state: 'abandoning', current_step: 'lookup' });
    const r = await retry(d, runId);
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ run_id: runId, state: 'abandoning', compensations_scheduled: 1, steps: ['refund'] });
    expect((await allEvents(d, runId)).at(-1)).toMatchObject({ kind: 'compensation.retry_requested', payload: { from_state: 'abandoning', steps: ['refund'] } });
    expect((await retry(d, runId)).body).toEqual(r.body); // a repeat while it waits: same answer
    const running = await getRun(d, runId);
    expect(running).toMatchObject({ current_step: 'lookup' });
    expect(running.steps.refund.state).toBe('failed'); // waits in the queue
    const lookup = await leaseAndComplete(d, { undone: true }, undefined, ['compensation']);
    expect(lookup.lease.step).toBe('lookup');
    expect(lookup.done).toEqual({ run_state: 'abandoning', next_step: 'refund' });
    const refund = await leaseAndComplete(d, { voided: true }, undefined, ['compensation']);
    expect(refund.lease).toMatchObject({ step: 'refund', attempt: 1 });
    expect(await getRun(d, runId)).toMatchObject({ state: 'abandoned', error: null });
    const events = await allEvents(d, runId);
    expect(events.filter((e) => e.kind === 'run.abandoned')).toEqual([expect.objectContaining({ payload: { reason: 'wrong customer', compensated: ['lookup', 'refund'], failed: [] } })]);
    await replayChecksOut(d, runId);
  });

  it('refuses clearly when there is nothing to retry: 409 invalid_state in the envelope, nothing appended (D §10)', async () => {
    await using d = await startRunDaemon();
    // abandoning, its compensation not failed (yet)
    const abandoning = await abandonedAfterRefund(d);
    const r2 = await retry(d, abandoning);
    expect(r2.status).toBe(409);
    expect(r2.body.error.message).toContain('none of its compensations has failed for good yet');
    // abandoned, every compensation completed
    await leaseAndComplete(d, { voided: true }, undefined, ['compensation']);
    expect((await getRun(d, abandoning)).state).toBe('abandoned');
    const r3 = await retry(d, abandoning);
    expect(r3.status).toBe(409);
    expect(r3.body.error.details).toMatchObject({ state: 'abandoned' });
    // running (started last: the lease helpers take the oldest ready step of any run)
    const { run_id: running } = await startRun(d, await pushBundle(d, drillBundle()), { autonomy: 'autonomous' });
    const before = (await allEvents(d, running)).length;
    const r1 = await retry(d, running);
    expect(r1.status).toBe(409);
    expect(r1.body).toEqual({
      error: {
        code: 'invalid_state',
        message: `run ${running} is running: it has not been abandoned, so no compensation has run (svc run abandon runs them); only compensations that failed for good (compensation.failed) of an abandoned or abandoning run can be retried`,
        details: { run_id: running, state: 'running' },
      },
    });
    expect((await allEvents(d, running)).length).toBe(before);
    // unknown run; bad bodies (the actor rule of abandon and resume)
    expect((await retry(d, 'run_nope')).status).toBe(404);
    for (const body of [{ reason: '' }, { reason: 5 }, { actor: 7 }, { actor: 'kernel' }, { actor: { id: 'ops-1', role: '' } }]) {
      const bad = await retry(d, abandoning, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(bad.body.error.code).toBe('request_invalid');
    }
  });

  it("is authorized as abandon and resume are: the listener's bearer when SVC_TOKEN is set (I 5.1), the actor recorded as given", async () => {
    await using d = await startRunDaemon({}, 'tok-123');
    const runId = await abandonedAfterRefund(d);
    await failCompensation(d, { code: 'gone', message: 'cannot void' }, true);
    const url = `${d.kernelUrl}/v1/runs/${runId}/compensations/retry`;
    const post = (headers: Record<string, string>) => fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ actor: OPS }) });
    const unauthorized = await post({});
    expect(unauthorized.status).toBe(401);
    expect(((await unauthorized.json()) as any).error.code).toBe('unauthorized');
    expect((await post({ authorization: 'Bearer wrong' })).status).toBe(401);
    expect((await getRun(d, runId)).state).toBe('abandoned'); // nothing happened
    const ok = await post({ authorization: 'Bearer tok-123' });
    expect(ok.status).toBe(202);
    expect((await allEvents(d, runId)).at(-1)).toMatchObject({ kind: 'compensation.retry_requested', actor: OPS });
  });
});
