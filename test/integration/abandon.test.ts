/**
 * Abandon and resume (interface 3 run rows, 4.1; decisions §6): compensations of completed
 * steps in reverse order as `compensation` leases, `abandoning` until they end, then
 * `abandoned`; 202 {compensations_scheduled}; abandon from parked and failed; 409 afterwards.
 */
import { describe, expect, it } from 'vitest';
import { canonicalHash } from '../../src/encoding/canonical-json.js';
import { Redactor } from '../../src/log/logger.js';
import { capturedLogger } from '../gateway/helpers.js';
import { allEvents, APPROVER, getRun, lease, leaseAndComplete, propose, pushBundle, refundsBundle, runToAction, sleep, startRun, startRunDaemon } from './run-fixtures.js';

describe('abandon (D §6)', () => {
  it("charges model usage the worker recorded that no lease reported, once (D §8; docs/design.md Spend)", async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d), { autonomy: 'autonomous' });
    const called = (leaseId: string, call_index: number, usage: unknown) =>
      d.kernel_(`/runs/${run_id}/events`, {
        body: { kind: 'model.called', payload: { source: 'worker', step: 'triage', call_index, segment: 0, usage }, actor: { worker_id: 'w-1' } },
        headers: { 'x-svc-lease': leaseId },
      });
    // Attempt 1 makes a call and fails: the fail reports that call's usage itself.
    const first = await lease(d);
    expect((await called(first.body.lease_id, 0, { tokens: 100, usd: 0.25 })).status).toBe(201);
    await d.kernel_(`/leases/${first.body.lease_id}/fail`, { body: { error: { code: 'provider_timeout', message: 'slow' }, deterministic: false, usage: { tokens: 100, usd: 0.25 } } });
    await sleep(1300); // the retry delay
    // Attempt 2 makes two more calls (one recorded twice) and is abandoned while it holds the lease.
    const second = await lease(d);
    expect(second.body).toMatchObject({ step: 'triage', attempt: 2 });
    await called(second.body.lease_id, 1, { tokens: 40, usd: 0.1 });
    await called(second.body.lease_id, 1, { tokens: 40, usd: 0.1 });
    await called(second.body.lease_id, 2, { tokens: 2, usd: 0.005 });
    await called(second.body.lease_id, 3, { tokens: -5, usd: 1 }); // not a usage: ignored
    expect((await getRun(d, run_id)).usage).toEqual({ tokens: 100, usd: 0.25 });
    const ab = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'customer withdrew', actor: { id: 'ops-1', role: 'ops' } } });
    expect(ab.status).toBe(202);
    const run = await getRun(d, run_id);
    expect(run).toMatchObject({ state: 'abandoned', usage: { tokens: 142, usd: 0.355 } });
    const requested = (await allEvents(d, run_id)).find((e) => e.kind === 'run.abandon_requested');
    expect(requested.payload.unreported_usage).toEqual({ tokens: 42, usd: 0.105 });
    const replay = await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' });
    expect(replay.body).toMatchObject({ chain_valid: true, state_matches: true });
  });

  it('a posted model.called with a usd of 1e308 or 1e300 is charged as the largest report, not summed into a 500 (D §10, §8)', async () => {
    await using d = await startRunDaemon();
    const bundle = await pushBundle(d);
    for (const usd of [1e308, 1e300]) {
      const { run_id, token } = await startRun(d, bundle);
      const posted = await d.kernel_(`/runs/${run_id}/events`, {
        headers: { 'x-svc-remit': token },
        body: { kind: 'model.called', payload: { step: 'triage', source: 'worker', call_index: 0, segment: 0, usage: { tokens: 1, usd } }, actor: { worker_id: 'w-1' } },
      });
      expect(posted.status).toBe(201);
      const ab = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'stop', actor: { id: 'ops-1', role: 'ops' } } });
      expect(ab.status, JSON.stringify(ab.body)).toBe(202);
      expect(await getRun(d, run_id)).toMatchObject({ state: 'abandoned', usage: { tokens: 1, usd: 1e12 } });
      const replay = await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' });
      expect(replay.status).toBe(200);
      expect(replay.body).toMatchObject({ chain_valid: true, state_matches: true });
    }
  });

  it('compensates completed steps last first through compensation leases, then abandons', async () => {
    await using d = await startRunDaemon();
    const b = refundsBundle();
    // lookup gets a compensation too, so the order can be seen
    b.tools!['billing.unlookup'] = { writes: true };
    b.workflows.refund!.steps[1]!.compensate = { tool: 'billing.unlookup', args: { invoice_id: '{{input.invoice_id}}', seen: '{{steps.lookup.output.rows}}' } };
    const { run_id } = await startRun(d, await pushBundle(d, b), { autonomy: 'autonomous' });
    await leaseAndComplete(d, { amount: 20 });
    await leaseAndComplete(d, { rows: 2 });
    await leaseAndComplete(d, { id: 'rf-77' });
    expect((await getRun(d, run_id)).state).toBe('completed');
    const late = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'too late', actor: { id: 'ops-1', role: 'ops' } } });
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('invalid_state');

    // the same again, abandoned before the run completes: after refund, while nothing is leased
    const second = await startRun(d, await pushBundle(d, b), { autonomy: 'autonomous' });
    await leaseAndComplete(d, { amount: 20 });
    await leaseAndComplete(d, { rows: 2 });
    const inFlight = await lease(d, ['action']);
    const ab = await d.kernel_(`/runs/${second.run_id}/abandon`, { body: { reason: 'customer withdrew', actor: { id: 'ops-1', role: 'ops' } } });
    expect(ab.status).toBe(202);
    expect(ab.body.compensations_scheduled).toBe(1); // only lookup completed; refund was in flight
    expect((await d.kernel_(`/leases/${inFlight.body.lease_id}/complete`, { body: { output: { id: 'x' } } })).status).toBe(410);
    const abandoning = await getRun(d, second.run_id);
    expect(abandoning).toMatchObject({ state: 'abandoning', current_step: 'lookup' });
    expect(abandoning.steps.lookup.state).toBe('compensating');

    expect((await lease(d, ['model', 'tool', 'action'])).status).toBe(204); // compensations only go to compensation workers
    const c = await lease(d, ['compensation']);
    expect(c.body).toMatchObject({ run_id: second.run_id, step: 'lookup', kind: 'compensation', attempt: 1 });
    expect(c.body.step_def).toEqual({ id: 'lookup', kind: 'compensation', compensates: 'lookup', tool: 'billing.unlookup', args: { invoice_id: 'inv-1', seen: 2 } });
    const done = await d.kernel_(`/leases/${c.body.lease_id}/complete`, { body: { output: { undone: true } } });
    expect(done.body).toEqual({ run_state: 'abandoned', next_step: null });
    const run = await getRun(d, second.run_id);
    expect(run).toMatchObject({ state: 'abandoned', current_step: null, error: null });
    expect(run.steps.lookup.state).toBe('compensated');
    expect(run.steps.refund.state).toBe('pending');
    const kinds = (await allEvents(d, second.run_id)).map((e) => e.kind);
    expect(kinds.slice(-4)).toEqual(['run.abandon_requested', 'step.leased', 'compensation.completed', 'run.abandoned']);
  });

  it('runs two compensations in reverse step order; a compensation reads its own step output', async () => {
    await using d = await startRunDaemon();
    const b = refundsBundle();
    b.tools!['billing.unlookup'] = { writes: true };
    b.workflows.refund!.steps[1]!.compensate = { tool: 'billing.unlookup', args: { rows: '{{steps.lookup.output.rows}}', amount: '{{steps.triage.output.amount}}' } };
    b.workflows.refund!.steps.push({ id: 'notify', kind: 'tool', tool: 'billing.lookup', args: {} });
    const { run_id } = await startRun(d, await pushBundle(d, b), { autonomy: 'autonomous' });
    await leaseAndComplete(d, { amount: 20 });
    await leaseAndComplete(d, { rows: 2 });
    await leaseAndComplete(d, { id: 'rf-77' });
    const ab = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'wrong customer' } });
    expect(ab.body.compensations_scheduled).toBe(2);
    const first = await lease(d, ['compensation']);
    expect(first.body.step).toBe('refund');
    expect(first.body.step_def.args).toEqual({ refund_id: 'rf-77' });
    expect(first.body.context.steps.refund).toEqual({ output: { id: 'rf-77' } });
    // a failed compensation is retried (backoff), then the queue moves on
    const f = await d.kernel_(`/leases/${first.body.lease_id}/fail`, { body: { error: { code: 'upstream_error', message: 'try later' } } });
    expect(f.body.outcome).toBe('retry_scheduled');
    const retried = await lease(d, ['compensation'], { wait_seconds: 5 });
    expect(retried.body).toMatchObject({ step: 'refund', attempt: 2 });
    expect((await d.kernel_(`/leases/${retried.body.lease_id}/complete`, { body: { output: { voided: true } } })).body).toEqual({ run_state: 'abandoning', next_step: 'lookup' });
    const second = await lease(d, ['compensation']);
    expect(second.body.step_def).toMatchObject({ tool: 'billing.unlookup', args: { rows: 2, amount: 20 } });
    const failed = await d.kernel_(`/leases/${second.body.lease_id}/fail`, { body: { error: { code: 'gone', message: 'cannot undo' }, deterministic: true } });
    expect(failed.body).toMatchObject({ outcome: 'quarantined', run_state: 'abandoned' });
    const run = await getRun(d, run_id);
    expect(run).toMatchObject({ state: 'abandoned', error: { code: 'compensation_failed' } });
    expect(run.steps.refund.state).toBe('compensated');
    expect(run.steps.lookup).toMatchObject({ state: 'failed', error: { code: 'gone' } });
    expect(run.steps.triage.state).toBe('completed');
    const last = (await allEvents(d, run_id)).pop();
    expect(last).toMatchObject({ kind: 'run.abandoned', payload: { reason: 'wrong customer', compensated: ['refund'], failed: ['lookup'] } });
  });

  it('a compensation whose args do not render fails as a step does: step.failed (lease_id null) then compensation.failed (svc-events(7))', async () => {
    await using d = await startRunDaemon();
    const b = refundsBundle();
    b.tools!['billing.unlookup'] = { writes: true };
    b.workflows.refund!.steps[1]!.compensate = { tool: 'billing.unlookup', args: { rows: '{{steps.lookup.output.missing.deep}}' } };
    const { run_id } = await startRun(d, await pushBundle(d, b), { autonomy: 'autonomous' });
    await leaseAndComplete(d, { amount: 20 });
    await leaseAndComplete(d, { rows: 2 });
    expect((await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'wrong customer' } })).status).toBe(202);
    expect((await lease(d, ['compensation'])).status).toBe(204);
    const events = await allEvents(d, run_id);
    expect(events.slice(-4).map((e) => e.kind)).toEqual(['run.abandon_requested', 'step.failed', 'compensation.failed', 'run.abandoned']);
    const [failed, compFailed] = events.slice(-3);
    expect(failed!.payload).toMatchObject({ step: 'lookup', kind: 'compensation', lease_id: null, deterministic: true, error: { code: 'template_invalid' } });
    expect(compFailed!.payload).toMatchObject({ step: 'lookup', lease_id: null, error: { code: 'template_invalid' } });
    expect((await getRun(d, run_id)).state).toBe('abandoned');
    expect((await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body).toMatchObject({ chain_valid: true, state_matches: true });
  });

  it('abandons at once when nothing needs compensating, also from parked (pending approval cancelled) and failed', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const p = (await propose(d, l.lease_id, { tool: 'billing.refund', args: { amount: 900 } })).body;
    expect((await getRun(d, run_id)).state).toBe('parked');
    const ab = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'not needed', actor: { id: 'ops-1', role: 'ops' } } });
    expect(ab.status).toBe(202);
    expect(ab.body.compensations_scheduled).toBe(0);
    expect(await getRun(d, run_id)).toMatchObject({ state: 'abandoned', pending_approval_id: null });
    expect((await d.kernel_(`/approvals/${p.approval_id}`)).body.state).toBe('cancelled');
    const late = await d.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'approved', actor: APPROVER } });
    expect(late.status).toBe(409);
    expect((await d.kernel_('/metrics')).body).toMatch(/^svc_approvals_pending 0$/m);
    const requested = (await allEvents(d, run_id)).find((e) => e.kind === 'run.abandon_requested');
    expect(requested).toMatchObject({ payload: { reason: 'not needed', from_state: 'parked', compensations: [], cancelled_approval_ids: [p.approval_id] }, actor: { id: 'ops-1', role: 'ops' } });

    const tiny = await startRun(d, await pushBundle(d), { spend: { tokens: 5, usd: 1 } });
    await leaseAndComplete(d, { amount: 1 }, { tokens: 10, usd: 0 });
    expect((await getRun(d, tiny.run_id)).state).toBe('failed');
    const fromFailed = await d.kernel_(`/runs/${tiny.run_id}/abandon`, { body: { reason: 'clean up' } });
    expect(fromFailed.status).toBe(202);
    expect((await getRun(d, tiny.run_id)).state).toBe('abandoned');
    expect((await d.kernel_(`/runs/${tiny.run_id}/abandon`, { body: { reason: 'again' } })).status).toBe(409);
    expect((await d.kernel_(`/runs/${tiny.run_id}/resume`, { body: {} })).status).toBe(409);
  });

  it('names the writes of a step that never completed, which no compensation undoes (docs/design.md Abandon)', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d, { amount: 50 });
    const allowed = await propose(d, l.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 50 } });
    expect(allowed.body.decision).toBe('allow');
    // The gateway ran the write for the step (as it records it), then the run was abandoned
    // before the worker completed the step.
    const called = (outcome: string) =>
      d.kernel_(`/runs/${run_id}/events`, {
        body: { kind: 'tool.called', payload: { tool: 'billing.refund', step: 'refund', writes: true, outcome }, actor: { id: 'gateway', role: 'gateway' } },
        headers: { 'x-svc-lease': l.lease_id },
      });
    expect((await called('ok')).status).toBe(201);
    expect((await called('args_invalid')).status).toBe(201); // never ran: not named
    const events = await allEvents(d, run_id);
    const decidedSeq = events.find((e) => e.kind === 'action.decided').seq;
    const calledSeq = events.find((e) => e.kind === 'tool.called').seq;
    const ab = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'wrong invoice', actor: { id: 'ops-1', role: 'ops' } } });
    expect(ab.status).toBe(202);
    // One write: the allowed action, with the gateway call that ran it.
    const named = [{ seq: decidedSeq, kind: 'action.decided', step: 'refund', tool: 'billing.refund', called_seq: calledSeq, outcome: 'ok' }];
    expect(ab.body).toEqual({ compensations_scheduled: 0, run_id, state: 'abandoned', uncompensated_writes: named, uncompensated_writes_total: 1 });
    const requested = (await allEvents(d, run_id)).find((e) => e.kind === 'run.abandon_requested');
    expect(requested.payload.uncompensated_writes).toEqual(named);
    expect(requested.payload).not.toHaveProperty('uncompensated_writes_total'); // only when more than named
    expect((await d.kernel_(`/runs/${run_id}/replay`, { body: {} })).body).toMatchObject({ chain_valid: true, state_matches: true });

    // A write waiting for its approval has not run: nothing is named.
    const parked = await runToAction(d, { amount: 500 });
    expect((await propose(d, parked.lease.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 500 } })).body.decision).toBe('approval_required');
    const second = await d.kernel_(`/runs/${parked.run_id}/abandon`, { body: { reason: 'x' } });
    expect(second.body).toMatchObject({ compensations_scheduled: 0, uncompensated_writes: [], uncompensated_writes_total: 0 });
    expect((await allEvents(d, parked.run_id)).find((e) => e.kind === 'run.abandon_requested').payload).not.toHaveProperty('uncompensated_writes');
  });

  it('a write the gateway records after the abandon is logged for an operator: no abandon answer or compensation knows of it (docs/design.md Abandon)', async () => {
    const log = capturedLogger(new Redactor());
    await using d = await startRunDaemon({}, null, { logger: log.logger });
    const { run_id, lease: l } = await runToAction(d, { amount: 50 });
    const ab = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'stop', actor: { id: 'ops-1', role: 'ops' } } });
    expect(ab.body).toMatchObject({ state: 'abandoned', uncompensated_writes_total: 0 });
    const called = (payload: Record<string, unknown>) =>
      d.kernel_(`/runs/${run_id}/events`, {
        body: { kind: 'tool.called', payload: { tool: 'billing.refund', step: 'refund', ...payload }, actor: { id: 'gateway', role: 'gateway' } },
        headers: { 'x-svc-remit': l.context.remit_token },
      });
    expect((await called({ writes: false, outcome: 'ok' })).status).toBe(201); // a read: nothing to say
    expect((await called({ writes: true, outcome: 'args_invalid' })).status).toBe(201); // never ran
    expect((await called({ writes: true, outcome: 'ok', replayed: true })).status).toBe(201); // answered from the store: ran before
    expect(log.text()).not.toContain('a write was recorded on a run after its abandon');
    const late = await called({ writes: true, outcome: 'ok' });
    expect(late.status).toBe(201);
    const line = log.text().split('\n').find((t) => t.includes('a write was recorded on a run after its abandon'));
    expect(JSON.parse(line!)).toMatchObject({ level: 'warn', run_id, seq: late.body.seq, tool: 'billing.refund', step: 'refund', outcome: 'ok', queued_at: null });
  });

  it('an action proposed again by a retried step, and its replayed call, are still one write (docs/design.md Abandon)', async () => {
    await using d = await startRunDaemon();
    const action = { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 50 } };
    const { run_id, lease: first } = await runToAction(d, { amount: 50 });
    const allowed = (await propose(d, first.lease_id, action)).body;
    expect(allowed.decision).toBe('allow');
    // As the gateway records its calls: the first ran the write, the retry's is a replay.
    const called = (leaseId: string, replayed: boolean) =>
      d.kernel_(`/runs/${run_id}/events`, {
        body: { kind: 'tool.called', payload: { tool: 'billing.refund', step: 'refund', writes: true, outcome: 'ok', replayed, args_hash: canonicalHash(action.args) }, actor: { id: 'gateway', role: 'gateway' } },
        headers: { 'x-svc-lease': leaseId },
      });
    expect((await called(first.lease_id, false)).status).toBe(201);
    // The worker lost the answer and failed the step; its retry proposes the same action.
    expect((await d.kernel_(`/leases/${first.lease_id}/fail`, { body: { error: { code: 'network_error', message: 'lost' }, deterministic: false } })).body.outcome).toBe('retry_scheduled');
    const again = await lease(d, ['action'], { wait_seconds: 5 });
    expect(again.status).toBe(200);
    expect((await propose(d, again.body.lease_id, action)).body).toMatchObject({ decision: 'allow', action_id: allowed.action_id });
    expect((await called(again.body.lease_id, true)).status).toBe(201);
    const events = await allEvents(d, run_id);
    const [decided] = events.filter((e) => e.kind === 'action.decided');
    const [ran] = events.filter((e) => e.kind === 'tool.called');
    expect(decided.payload.args_hash).toBe(canonicalHash(action.args)); // the gateway's hash of the same arguments
    const ab = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'wrong invoice', actor: { id: 'ops-1', role: 'ops' } } });
    expect(ab.body).toMatchObject({ uncompensated_writes: [{ seq: decided.seq, kind: 'action.decided', step: 'refund', tool: 'billing.refund', called_seq: ran.seq }], uncompensated_writes_total: 1 });
  });

  it('a repeated abandon answers the compensations the first scheduled, not those still queued (I 4.1 abandon 202 {compensations_scheduled})', async () => {
    await using d = await startRunDaemon();
    const b = refundsBundle();
    b.tools!['billing.unlookup'] = { writes: true };
    b.tools!['billing.notify'] = { writes: false };
    const steps = b.workflows.refund!.steps;
    steps[1]!.compensate = { tool: 'billing.unlookup', args: {} };
    steps.push({ id: 'notify', kind: 'tool', tool: 'billing.notify', args: {} });
    const { run_id } = await startRun(d, await pushBundle(d, b), { autonomy: 'autonomous' });
    await leaseAndComplete(d, { amount: 20 });
    await leaseAndComplete(d, { rows: 2 });
    await leaseAndComplete(d, { id: 'rf-9' }, undefined, ['action']);
    const first = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'wrong customer' } });
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ compensations_scheduled: 2, state: 'abandoning' });
    // The first compensation (the refund's, last step first) ends; one is still queued.
    const comp = await leaseAndComplete(d, { voided: true }, undefined, ['compensation']);
    expect(comp.lease.step).toBe('refund');
    expect((await getRun(d, run_id)).state).toBe('abandoning');
    const again = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'again' } });
    expect(again.status).toBe(202);
    expect(again.body).toEqual(first.body);
  });

  it('while compensations run, a repeated abandon answers the same unfinished writes (docs/design.md Abandon)', async () => {
    await using d = await startRunDaemon();
    const b = refundsBundle();
    b.tools!['billing.unlookup'] = { writes: true };
    b.workflows.refund!.steps[1]!.compensate = { tool: 'billing.unlookup', args: {} };
    const { run_id } = await startRun(d, await pushBundle(d, b), { autonomy: 'autonomous' });
    await leaseAndComplete(d, { amount: 20 });
    await leaseAndComplete(d, { rows: 2 });
    const l = await lease(d, ['action']);
    expect((await propose(d, l.body.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 20 } })).body.decision).toBe('allow');
    const first = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'wrong customer' } });
    expect(first.body).toMatchObject({ compensations_scheduled: 1, state: 'abandoning', uncompensated_writes_total: 1 });
    expect(first.body.uncompensated_writes).toEqual([expect.objectContaining({ kind: 'action.decided', step: 'refund', tool: 'billing.refund' })]);
    const again = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'again' } });
    expect(again.status).toBe(202);
    expect(again.body).toEqual(first.body);
    // The compensation of lookup runs; its gateway call is for a completed step: not named.
    const comp = await lease(d, ['compensation']);
    await d.kernel_(`/runs/${run_id}/events`, {
      body: { kind: 'tool.called', payload: { tool: 'billing.unlookup', step: 'lookup', writes: true, outcome: 'ok' }, actor: { id: 'gateway', role: 'gateway' } },
      headers: { 'x-svc-lease': comp.body.lease_id },
    });
    expect((await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'third' } })).body.uncompensated_writes).toEqual(first.body.uncompensated_writes);
    // Even a write of the unfinished step logged after the abandon leaves the answer as the
    // abandon recorded it on run.abandon_requested.
    await d.kernel_(`/runs/${run_id}/events`, {
      body: { kind: 'tool.called', payload: { tool: 'billing.other', step: 'refund', writes: true, outcome: 'ok' }, actor: { id: 'gateway', role: 'gateway' } },
      headers: { 'x-svc-lease': comp.body.lease_id },
    });
    const fourth = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'fourth' } });
    expect(fourth.body).toEqual(first.body);
    const requested = (await allEvents(d, run_id)).find((e) => e.kind === 'run.abandon_requested');
    expect(requested.payload.uncompensated_writes).toEqual(first.body.uncompensated_writes);
  });

  it('validates the body: reason is required (400); unknown runs are 404', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    for (const body of [{}, { reason: '' }, { reason: 5 }, ...[5, '', [], true, { id: 7, role: 'ops' }, { id: 'ops-1', role: null }].map((actor) => ({ reason: 'x', actor }))]) {
      expect((await d.kernel_(`/runs/${run_id}/abandon`, { body })).status, JSON.stringify(body)).toBe(400);
      expect((await d.kernel_(`/runs/${run_id}/resume`, { body: { actor: 'actor' in body ? body.actor : 7 } })).status, JSON.stringify(body)).toBe(400);
    }
    // An actor that may decide an approval may also abandon and resume (one rule for names).
    const long = { id: 'o'.repeat(300), role: 'ops' };
    expect((await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'x', actor: long } })).status).toBe(202);
    expect((await d.kernel_('/runs/run_nope/abandon', { body: { reason: 'x' } })).status).toBe(404);
    expect((await d.kernel_('/runs/run_nope/resume', { body: {} })).status).toBe(404);
  });
});
