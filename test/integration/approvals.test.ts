/**
 * Approvals (interface 2.8, 3 approval rows; decisions 5.4): the inbox list and its filters,
 * the decision with the approver check and no self-approval, already_decided, re-lease with
 * approved_actions, and the approved:<id> / rejected:<id> rules.
 */
import { describe, expect, it } from 'vitest';
import { allEvents, APPROVER, getRun, lease, propose, pushBundle, REQUESTER, runToAction, startRun, startRunDaemon } from './run-fixtures.js';

const BIG = { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 500 } };

describe('deciding an approval (I 3, D 5.4)', () => {
  it('approved: run_state running, the step re-leased with the action in approved_actions, the same proposal allowed as approved:<id>', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const p = (await propose(d, l.lease_id, BIG)).body;
    const r = await d.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'approved', actor: APPROVER, reason: 'customer verified' } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ run_id, run_state: 'running' });
    const a = (await d.kernel_(`/approvals/${p.approval_id}`)).body;
    expect(a).toMatchObject({ state: 'approved', decision: 'approved', actor: APPROVER, reason: 'customer verified', decided_at: expect.any(String) });
    expect(await getRun(d, run_id)).toMatchObject({ state: 'running', parked_reason: null, pending_approval_id: null });

    const l2 = await lease(d, ['action']);
    expect(l2.body).toMatchObject({ step: 'refund', attempt: 1 });
    expect(l2.body.context.approved_actions).toEqual([p.action_id]);
    expect(l2.body.context.prior_events.map((e: any) => e.kind)).toEqual(['step.leased', 'action.decided', 'approval.requested', 'run.parked', 'approval.decided', 'run.resumed']);
    const again = await propose(d, l2.body.lease_id, BIG);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ action_id: p.action_id, decision: 'allow', rule: `approved:${p.approval_id}`, approval_id: p.approval_id });
    expect((await d.kernel_(`/leases/${l2.body.lease_id}/complete`, { body: { output: { id: 'rf-1' } } })).body).toEqual({ run_state: 'completed', next_step: null });
    const decided = (await allEvents(d, run_id)).find((e) => e.kind === 'approval.decided');
    expect(decided).toMatchObject({ payload: { approval_id: p.approval_id, decision: 'approved', reason: 'customer verified', action_id: p.action_id, step: 'refund' }, actor: APPROVER });
    expect((await d.kernel_('/metrics')).body).toMatch(/^svc_approvals_pending 0$/m);
  });

  it('rejected: run_state running, the rejection is in prior_events, the same proposal is denied as rejected:<id>', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const p = (await propose(d, l.lease_id, BIG)).body;
    const r = await d.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'rejected', actor: APPROVER, reason: 'too large' } });
    expect(r.body).toMatchObject({ run_id, run_state: 'running' });
    const l2 = await lease(d, ['action']);
    expect(l2.body.context.approved_actions).toEqual([]);
    const rejection = l2.body.context.prior_events.find((e: any) => e.kind === 'approval.decided');
    expect(rejection.payload).toMatchObject({ decision: 'rejected', reason: 'too large' });
    const again = await propose(d, l2.body.lease_id, BIG);
    expect(again.status).toBe(403);
    expect(again.body.error).toMatchObject({ code: 'action_denied', details: { rule: `rejected:${p.approval_id}`, approval_id: p.approval_id } });
    // a different, smaller proposal is decided by the policy again
    const small = await propose(d, l2.body.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 90 } });
    expect(small.body).toMatchObject({ decision: 'allow', rule: 'refunds/small_refund' });
  });

  it('only the approver role may decide, never the requester; a second decision is 409 already_decided', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const p = (await propose(d, l.lease_id, BIG)).body;
    const wrongRole = await d.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'approved', actor: { id: 'sam', role: 'support' } } });
    expect(wrongRole.status).toBe(403);
    expect(wrongRole.body.error.code).toBe('not_the_approver');
    // The requester's id as people may write it is still the requester (trailing space, case, full width).
    // And with a character that shows nothing and that the id pattern lets through (not a
    // format character): a combining grapheme joiner, a variation selector, a Hangul filler.
    const invisible = [`${REQUESTER.id}\u034f`, `${REQUESTER.id}\ufe0f`, `\u3164${REQUESTER.id}`, `${REQUESTER.id.slice(0, 1)}\u115f${REQUESTER.id.slice(1)}`];
    for (const id of [REQUESTER.id, `${REQUESTER.id} `, REQUESTER.id.toUpperCase(), REQUESTER.id.normalize('NFKC').replace(/[a-z]/g, (c) => String.fromCodePoint(c.codePointAt(0)! + 0xfee0)), ...invisible]) {
      const self = await d.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'approved', actor: { id, role: 'finance' } } });
      expect(self.status, JSON.stringify(id)).toBe(403);
      expect(self.body.error).toMatchObject({ code: 'not_the_approver', details: { reason: 'self_approval' } });
    }
    expect((await getRun(d, run_id)).state).toBe('parked');

    expect((await d.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'approved', actor: APPROVER } })).status).toBe(200);
    const second = await d.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'rejected', actor: { id: 'fin-2', role: 'finance' }, reason: 'late' } });
    expect(second.status).toBe(409);
    expect(second.body.error).toMatchObject({ code: 'already_decided', details: { state: 'approved' } });
    // Interface §3: a second decision is 409 whoever sends it, a wrong role or the requester too.
    for (const actor of [{ id: 'sam', role: 'support' }, { id: REQUESTER.id, role: 'finance' }]) {
      const late = await d.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'rejected', actor } });
      expect(late.status, actor.id).toBe(409);
      expect(late.body.error.code).toBe('already_decided');
    }
    expect((await d.kernel_(`/approvals/${p.approval_id}`)).body.state).toBe('approved');
  });

  it('validates the body and the id: 400 request_invalid, 404 not_found', async () => {
    await using d = await startRunDaemon();
    const { lease: l } = await runToAction(d);
    const p = (await propose(d, l.lease_id, BIG)).body;
    for (const body of [{}, { decision: 'maybe', actor: APPROVER }, { decision: 'approved' }, { decision: 'approved', actor: { id: 'x' } }, { decision: 'approved', actor: APPROVER, reason: 5 }]) {
      const r = await d.kernel_(`/approvals/${p.approval_id}`, { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
    // An approver id that reads as another (the requester's, with a zero-width or bidi mark).
    const lookalike = await d.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'approved', actor: { id: `${APPROVER.id}\u200e`, role: APPROVER.role } } });
    expect(lookalike.body.error).toMatchObject({ code: 'request_invalid', message: '/actor/id must not contain control, format (bidirectional or zero-width) or line-separator characters', details: { path: '/actor/id' } });
    expect((await d.kernel_('/approvals/apr_nope')).status).toBe(404);
    const nf = await d.kernel_('/approvals/apr_nope', { body: { decision: 'approved', actor: APPROVER } });
    expect(nf.status).toBe(404);
    expect(nf.body.error.details).toEqual({ resource: 'approval', id: 'apr_nope' });
  });
});

describe('GET /approvals (I 4.1, D 5.4)', () => {
  it('lists {approvals, next} newest first, filtered by state and approver, paginated with opaque cursors', async () => {
    await using d = await startRunDaemon();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const { lease: l } = await runToAction(d);
      ids.push((await propose(d, l.lease_id, BIG)).body.approval_id);
    }
    await d.kernel_(`/approvals/${ids[0]}`, { body: { decision: 'rejected', actor: APPROVER, reason: 'no' } });
    const all = (await d.kernel_('/approvals')).body;
    expect(all.approvals.map((a: any) => a.approval_id)).toEqual([...ids].reverse());
    expect(all.next).toBeNull();
    const pending = (await d.kernel_('/approvals?state=pending&approver=role:finance')).body;
    expect(pending.approvals.map((a: any) => a.approval_id)).toEqual([ids[2], ids[1]]);
    expect((await d.kernel_('/approvals?approver=role:legal')).body.approvals).toEqual([]);
    const p1 = (await d.kernel_('/approvals?limit=2')).body;
    expect(p1.approvals).toHaveLength(2);
    expect(typeof p1.next).toBe('string');
    const p2 = (await d.kernel_(`/approvals?limit=2&after=${encodeURIComponent(p1.next)}`)).body;
    expect(p2.approvals.map((a: any) => a.approval_id)).toEqual([ids[0]]);
    expect(p2.next).toBeNull();
    for (const q of ['state=maybe', 'limit=0', 'limit=501', 'after=garbage']) {
      const r = await d.kernel_(`/approvals?${q}`);
      expect(r.status, q).toBe(400);
    }
    expect((await d.kernel_('/metrics')).body).toMatch(/^svc_approvals_pending 2$/m);
  });

  it('svc_approvals_pending counts approvals, not what a posted event says it cancelled (I 4.1 metrics, D §7)', async () => {
    await using d = await startRunDaemon();
    const { lease: l } = await runToAction(d);
    expect((await propose(d, l.lease_id, BIG)).body.decision).toBe('approval_required');
    const other = await startRun(d, await pushBundle(d));
    const posted = await d.kernel_(`/runs/${other.run_id}/events`, {
      headers: { 'x-svc-remit': other.token },
      body: { kind: 'note', payload: { text: 'hello', cancelled_approval_ids: ['x', 'y', 'z'] }, actor: { worker_id: 'w-1' } },
    });
    expect(posted.status).toBe(201);
    expect((await d.kernel_('/approvals?state=pending')).body.approvals).toHaveLength(1);
    expect((await d.kernel_('/metrics')).body).toMatch(/^svc_approvals_pending 1$/m);
  });
});

describe('an approval outlived by its run (I 3 approval rows; docs/design.md "Approvals")', () => {
  it('a run parked for a human, resumed and then completed cancels the approval: out of the inbox, not decidable, named in run.completed', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const p = (await propose(d, l.lease_id, BIG)).body;
    expect(p.decision).toBe('approval_required');
    expect((await d.kernel_('/metrics')).body).toMatch(/^svc_approvals_pending 1$/m);
    // An operator resumes the run without a decision; the worker proposes a smaller refund.
    expect((await d.kernel_(`/runs/${run_id}/resume`, { body: { actor: { id: 'op-1', role: 'operator' } } })).status).toBe(200);
    const l2 = (await lease(d, ['action'])).body;
    expect((await propose(d, l2.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 50 } })).body.decision).toBe('allow');
    expect((await d.kernel_(`/leases/${l2.lease_id}/complete`, { body: { output: { id: 'rf-2' } } })).body).toEqual({ run_state: 'completed', next_step: null });

    expect((await d.kernel_(`/approvals/${p.approval_id}`)).body).toMatchObject({ state: 'cancelled', decision: null, decided_at: expect.any(String) });
    expect((await d.kernel_('/approvals?state=pending')).body.approvals).toEqual([]);
    expect((await d.kernel_('/metrics')).body).toMatch(/^svc_approvals_pending 0$/m);
    const late = await d.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'approved', actor: APPROVER, reason: 'late' } });
    expect(late.status).toBe(409);
    expect(late.body.error).toMatchObject({ code: 'invalid_state', details: { approval_id: p.approval_id, state: 'cancelled', run_state: 'completed' } });
    expect(late.body.error.message).toContain('ended (completed)');

    const events = await allEvents(d, run_id);
    expect(events.at(-1)).toMatchObject({ kind: 'run.completed', payload: { output: { id: 'rf-2' }, cancelled_approval_ids: [p.approval_id] } });
    expect(events.some((e) => e.kind === 'approval.decided')).toBe(false);
    expect(await getRun(d, run_id)).toMatchObject({ state: 'completed', pending_approval_id: null });
    expect((await d.kernel_(`/runs/${run_id}/replay`, { body: {} })).body).toMatchObject({ chain_valid: true, state_matches: true });
  });

  it('a run that fails for its budget after such a resume cancels the approval too (run.failed names it)', async () => {
    await using d = await startRunDaemon();
    // leaseAndComplete spends 10 tokens a step: two steps in, 5 tokens are left.
    const { run_id, lease: l } = await runToAction(d, { spend: { tokens: 25, usd: 5 } });
    const p = (await propose(d, l.lease_id, BIG)).body;
    await d.kernel_(`/runs/${run_id}/resume`, { body: { actor: { id: 'op-1', role: 'operator' } } });
    const l2 = (await lease(d, ['action'])).body;
    const done = await d.kernel_(`/leases/${l2.lease_id}/complete`, { body: { output: { id: 'rf-4' }, usage: { tokens: 50, usd: 0 } } });
    expect(done.body).toMatchObject({ run_state: 'failed' });
    expect((await allEvents(d, run_id)).at(-1)).toMatchObject({ kind: 'run.failed', payload: { error: { code: 'budget_exhausted' }, cancelled_approval_ids: [p.approval_id] } });
    expect((await d.kernel_(`/approvals/${p.approval_id}`)).body.state).toBe('cancelled');
    expect((await d.kernel_('/metrics')).body).toMatch(/^svc_approvals_pending 0$/m);
  });

  it('a run with no pending approval completes with run.completed {output} alone', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    expect((await propose(d, l.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 50 } })).body.decision).toBe('allow');
    await d.kernel_(`/leases/${l.lease_id}/complete`, { body: { output: { id: 'rf-3' } } });
    expect((await allEvents(d, run_id)).at(-1)).toEqual(expect.objectContaining({ kind: 'run.completed', payload: { output: { id: 'rf-3' } } }));
  });
});
