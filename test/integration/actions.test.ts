/**
 * Action proposals (interface 2.7, 3, 4.1 rule 4; decisions 5.2, 5.4): enrichment from the
 * gateway's descriptors and the bundle (never the worker), decisions under the pinned
 * policies, action.decided with what replay needs, allow / 403 action_denied /
 * approval_required (approval created, run parked, lease released at once).
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/encoding/canonical-json.js';
import type { ToolDescriptor } from '../../src/types.js';
import { allEvents, getRun, lease, leaseAndComplete, propose, pushBundle, pushPolicy, refundsBundle, REQUESTER, runToAction, sleep, startRun, startRunDaemon } from './run-fixtures.js';

function descriptor(id: string, writes: boolean): ToolDescriptor {
  return { id, connector: id.split('.')[0]!, description: id, writes, input_schema: { type: 'object' }, scope_derivation: 'table', contract: { required: {} } };
}

describe('POST /leases/{id}/actions (I 2.7, D 5.2, 5.4)', () => {
  it('allow: decided by the pinned policy, recorded with the enriched action and the run context', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const action = { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 40 }, summary: 'refund 40 on inv-1' };
    const r = await propose(d, l.lease_id, action);
    expect(r.status).toBe(200);
    const expectedId = 'act_' + createHash('sha256').update(`${run_id}\nrefund\n${canonicalJson(action)}`).digest('hex').slice(0, 26);
    expect(r.body).toEqual({ action_id: expectedId, decision: 'allow', rule: 'refunds/small_refund', approval_id: null });
    const ev = (await allEvents(d, run_id)).find((e) => e.kind === 'action.decided');
    expect(ev.payload).toMatchObject({
      step: 'refund',
      lease_id: l.lease_id,
      action_id: expectedId,
      proposal: action,
      action: { tool: 'billing.refund', connector: 'billing', operation: 'refund', args: action.args, writes: true, system_of_record: true, summary: 'refund 40 on inv-1' },
      run: { id: run_id, bundle: 'refunds', workflow: 'refund', department: 'support', requested_by: REQUESTER, remit: { autonomy: 'supervised' } },
      policies: [{ name: 'refunds', version: '1' }],
      source: 'policy',
      decision: 'allow',
      rule: 'refunds/small_refund',
      approval_id: null,
    });
    expect(ev.actor).toEqual({ worker_id: 'w-1' });
    // the same proposal in the same step has the same id; the lease is still usable
    expect((await propose(d, l.lease_id, action)).body.action_id).toBe(expectedId);
    expect((await d.kernel_(`/leases/${l.lease_id}/heartbeat`, { method: 'POST' })).status).toBe(200);
  });

  it('deny: 403 action_denied naming the rule; the decision is recorded; the lease stays', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const r = await propose(d, l.lease_id, { tool: 'billing.export', args: {} });
    expect(r.status).toBe(403);
    expect(r.body.error).toMatchObject({ code: 'action_denied', details: { decision: 'deny', rule: 'refunds/no_export', approval_id: null, action_id: expect.stringMatching(/^act_[0-9a-f]{26}$/) } });
    const events = await allEvents(d, run_id);
    expect(events[events.length - 1]).toMatchObject({ kind: 'action.decided', payload: { decision: 'deny', rule: 'refunds/no_export' } });
    expect((await getRun(d, run_id)).state).toBe('running');
    expect((await d.kernel_(`/leases/${l.lease_id}/heartbeat`, { method: 'POST' })).status).toBe(200);
  });

  it("a condition that fails at decision time counts fail-closed and is listed in the decision's errors (D 5.1)", async () => {
    await using d = await startRunDaemon();
    await pushPolicy(d, 'strict', '1', 'deny odd when action.args.nope > 1\nallow rest when true\n');
    const { lease: l } = await runToAction(d, { policy_set: ['strict'] });
    const denied = await propose(d, l.lease_id, { tool: 'billing.refund', args: { amount: 5 } });
    expect(denied.status).toBe(403);
    expect(denied.body.error).toMatchObject({ code: 'action_denied', details: { rule: 'strict/odd', errors: [{ rule: 'strict/odd', message: expect.any(String) }] } });
    // A clean decision keeps interface 4.1's four members.
    await pushPolicy(d, 'clean', '1', 'allow all when true\n');
    const second = await runToAction(d, { policy_set: ['clean'] });
    const ok = await propose(d, second.lease.lease_id, { tool: 'billing.refund', args: { amount: 5 } });
    expect(Object.keys(ok.body).sort()).toEqual(['action_id', 'approval_id', 'decision', 'rule']);
  });

  it('an approval asked for by a condition that failed closed carries its errors, in the list and alone (D 5.1; docs/design.md)', async () => {
    await using d = await startRunDaemon();
    await pushPolicy(d, 'typo', '1', 'require_approval big by "role:finance" when action.args.amout > 100\nallow rest when true\n');
    const { lease: l } = await runToAction(d, { policy_set: ['typo'] });
    const r = await propose(d, l.lease_id, { tool: 'billing.refund', args: { amount: 5 } });
    expect(r.body).toMatchObject({ decision: 'approval_required', rule: 'typo/big', errors: [{ rule: 'typo/big', message: expect.stringContaining('amout') }] });
    const one = (await d.kernel_(`/approvals/${r.body.approval_id}`)).body;
    expect(one.errors).toEqual(r.body.errors);
    const listed = (await d.kernel_('/approvals?state=pending')).body.approvals.find((a: { approval_id: string }) => a.approval_id === r.body.approval_id);
    expect(listed.errors).toEqual(r.body.errors);
    // A rule that matched cleanly asks with no errors member (the shape of the approval above).
    await pushPolicy(d, 'plain', '1', 'require_approval big by "role:finance" when action.args.amount > 1\n');
    const second = await runToAction(d, { policy_set: ['plain'] });
    const clean = await propose(d, second.lease.lease_id, { tool: 'billing.refund', args: { amount: 5 } });
    expect(clean.body.decision).toBe('approval_required');
    expect('errors' in (await d.kernel_(`/approvals/${clean.body.approval_id}`)).body).toBe(false);
  });

  it('approval_required: approval created, run parked for a human, lease released at once (I 4.1 rule 4)', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const action = { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 500 } };
    const r = await propose(d, l.lease_id, action);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ decision: 'approval_required', rule: 'refunds/large_refund', approval_id: expect.stringMatching(/^apr_/) });
    const run = await getRun(d, run_id);
    expect(run).toMatchObject({ state: 'parked', parked_reason: 'human', pending_approval_id: r.body.approval_id, current_step: 'refund' });
    expect(run.steps.refund).toMatchObject({ state: 'pending', attempt: 1 });
    for (const path of ['heartbeat', 'complete']) {
      const gone = await d.kernel_(`/leases/${l.lease_id}/${path}`, { method: 'POST', body: path === 'complete' ? { output: {} } : undefined });
      expect(gone.status, path).toBe(410);
      expect(gone.body.error).toMatchObject({ code: 'lease_expired', details: { status: 'released' } });
    }
    const again = await propose(d, l.lease_id, action);
    expect(again.status).toBe(410);
    expect((await lease(d, ['action'])).status).toBe(204);
    const approval = (await d.kernel_(`/approvals/${r.body.approval_id}`)).body;
    expect(approval).toEqual({
      approval_id: r.body.approval_id,
      run_id,
      step: 'refund',
      action_id: r.body.action_id,
      action: expect.objectContaining({ tool: 'billing.refund', args: action.args, writes: true, system_of_record: true }),
      rule: 'refunds/large_refund',
      approver: 'role:finance',
      state: 'pending',
      created_at: expect.any(String),
      decided_at: null,
      decision: null,
      actor: null,
      reason: null,
    });
    const kinds = (await allEvents(d, run_id)).slice(-3).map((e) => e.kind);
    expect(kinds).toEqual(['action.decided', 'approval.requested', 'run.parked']);
    expect((await d.kernel_('/metrics')).body).toMatch(/^svc_approvals_pending 1$/m);
  });

  it('a second identical proposal while the approval is pending returns the same approval and parks again', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const action = { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 500 } };
    const first = await propose(d, l.lease_id, action);
    await d.kernel_(`/runs/${run_id}/resume`, { body: { actor: { id: 'ops-1', role: 'ops' } } });
    const l2 = await lease(d, ['action']);
    expect(l2.body.step).toBe('refund');
    const second = await propose(d, l2.body.lease_id, action);
    expect(second.body).toEqual(first.body);
    expect(await getRun(d, run_id)).toMatchObject({ state: 'parked', parked_reason: 'human', pending_approval_id: first.body.approval_id });
    const list = (await d.kernel_(`/approvals?run_id=${run_id}`)).body;
    expect(list.approvals).toHaveLength(1);
    const decided = (await allEvents(d, run_id)).filter((e) => e.kind === 'action.decided');
    expect(decided.map((e) => e.payload.source)).toEqual(['policy', 'approval']);
  });

  it('enriches from the gateway descriptors and the bundle systems_of_record, never from the worker (D 5.2)', async () => {
    await using d = await startRunDaemon();
    const catalog = new Map<string, ToolDescriptor>([
      ['billing.refund', descriptor('billing.refund', true)],
      ['billing.lookup', descriptor('billing.lookup', false)],
      ['crm.note', descriptor('crm.note', true)],
    ]);
    d.kernel!.toolCatalog = { describe: async (id) => catalog.get(id) ?? null };
    const { run_id, lease: l } = await runToAction(d, { policy_set: [] });
    // A read is allowed by the default rule even though the worker claims a write.
    const read = await propose(d, l.lease_id, { tool: 'billing.lookup', args: {}, writes: true });
    expect(read.body).toMatchObject({ decision: 'allow', rule: 'default/allow' });
    // A write outside the systems of record is allowed by default.
    const crm = await propose(d, l.lease_id, { tool: 'crm.note', args: {} });
    expect(crm.body).toMatchObject({ decision: 'allow', rule: 'default/allow' });
    const events = (await allEvents(d, run_id)).filter((e) => e.kind === 'action.decided');
    expect(events[0].payload.action).toMatchObject({ writes: false, system_of_record: true });
    expect(events[1].payload.action).toMatchObject({ writes: true, system_of_record: false });
    // A write to a system of record needs the manager, whatever the worker says about it.
    const write = await propose(d, l.lease_id, { tool: 'billing.refund', args: { amount: 1 }, writes: false, system_of_record: false });
    expect(write.body).toMatchObject({ decision: 'approval_required', rule: 'default/sor_write' });
    expect((await d.kernel_(`/approvals/${write.body.approval_id}`)).body.approver).toBe('role:finance');
  });

  // decisions §6 (a lease's ttl): a gateway slow to describe the tools delays the lease, not
  // the time its ttl counts from (asked after the commit, a 5 s fetch ate 5 s of the lease).
  it('lease: the tool descriptors are asked for before the lease starts, so a slow catalog does not eat into its ttl', async () => {
    await using d = await startRunDaemon();
    let fetched = false;
    d.kernel!.toolCatalog = {
      describe: async (id) => {
        if (!fetched) await sleep(600); // the first fetch is slow; the catalog keeps what it read
        fetched = true;
        return id.startsWith('billing.') ? descriptor(id, false) : null;
      },
    };
    await startRun(d, await pushBundle(d), { policy_set: [] });
    const asked = Date.now();
    const model = await lease(d, ['model']);
    expect(model.status).toBe(200);
    const started = Date.parse(model.body.expires_at) - model.body.ttl_seconds * 1000;
    expect(started).toBeGreaterThanOrEqual(asked + 550);
    expect(model.body.context.tools).toEqual([expect.objectContaining({ id: 'billing.lookup', known: true })]);
  });

  it("lease context tools: the gateway's descriptor, with the bundle's description where it gives one (svc-bundle(5) tools)", async () => {
    await using d = await startRunDaemon();
    d.kernel!.toolCatalog = { describe: async (id) => (id.startsWith('billing.') ? descriptor(id, id !== 'billing.lookup') : null) };
    const base = refundsBundle();
    const bundleId = await pushBundle(d, refundsBundle({ version: '1.0.1', tools: { ...base.tools, 'billing.lookup': { writes: false, description: 'Look up the invoice the ticket names' } } }));
    await startRun(d, bundleId, { policy_set: [] });
    const model = await lease(d, ['model']);
    expect(model.body.context.tools).toEqual([
      { ...descriptor('billing.lookup', false), description: 'Look up the invoice the ticket names', system_of_record: true, known: true },
    ]);
    await d.kernel_(`/leases/${model.body.lease_id}/complete`, { body: { output: { amount: 5 }, usage: { tokens: 1, usd: 0 } } });
    await leaseAndComplete(d, { rows: [] }, undefined, ['tool']);
    // billing.refund is declared without a description: the gateway's stays.
    const action = await lease(d, ['action']);
    expect(action.body.context.tools).toEqual([{ ...descriptor('billing.refund', true), system_of_record: true, known: true }]);
  });

  it('a tool nobody can describe is a write to a system of record; autonomous remits skip the default approval', async () => {
    await using d = await startRunDaemon();
    d.kernel!.toolCatalog = { describe: async () => null };
    const sup = await runToAction(d, { policy_set: [] });
    const r = await propose(d, sup.lease.lease_id, { tool: 'mystery.do', args: {} });
    expect(r.body).toMatchObject({ decision: 'approval_required', rule: 'default/sor_write' });
    const auto = await runToAction(d, { policy_set: [], autonomy: 'autonomous' });
    const a = await propose(d, auto.lease.lease_id, { tool: 'mystery.do', args: {} });
    expect(a.body).toMatchObject({ decision: 'allow', rule: 'default/allow' });
  });

  it('refuses malformed proposals with 400 and unknown leases with 404', async () => {
    await using d = await startRunDaemon();
    const { lease: l } = await runToAction(d);
    const notIds = ['notatool', '.x', 'x.', 'billing.*', 'A B.c'].map((tool) => ({ action: { tool, args: {} } })); // I 2.1
    for (const body of [{}, { action: 'x' }, { action: {} }, { action: { tool: 5 } }, { action: { tool: 'a.b', args: [1] } }, ...notIds]) {
      const r = await d.kernel_(`/leases/${l.lease_id}/actions`, { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.code).toBe('request_invalid');
    }
    expect((await propose(d, 'lse_nope', { tool: 'a.b' })).status).toBe(404);
  });

  it('a compensation lease proposes no actions: 409 invalid_state, nothing decided, the lease still runs its compensate tool (docs/design.md "Runs, events and approvals")', async () => {
    await using d = await startRunDaemon();
    const b = refundsBundle();
    b.workflows.refund!.steps.push({ id: 'notify', kind: 'tool', tool: 'billing.lookup', args: { invoice_id: '{{input.invoice_id}}' } });
    await pushPolicy(d, 'refunds', '1', 'allow small_refund\n  when action.tool == "billing.refund" && action.args.amount <= 100\n');
    const { run_id } = await startRun(d, await pushBundle(d, b), { policy_set: ['refunds'] });
    await leaseAndComplete(d, { amount: 50 });
    await leaseAndComplete(d, { rows: [] });
    const act = (await lease(d, ['action'])).body;
    expect((await propose(d, act.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 50 } })).body.decision).toBe('allow');
    expect((await d.kernel_(`/leases/${act.lease_id}/complete`, { body: { output: { id: 'rf-1' } } })).status).toBe(200);
    expect((await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'withdrawn', actor: { id: 'ops-1', role: 'ops' } } })).body.compensations_scheduled).toBe(1);
    const comp = (await lease(d, ['compensation'])).body;
    const decidedBefore = (await allEvents(d, run_id)).filter((e) => e.kind === 'action.decided').length;
    const r = await propose(d, comp.lease_id, { tool: 'billing.void_refund', args: { refund_id: 'rf-1' } });
    expect(r.status).toBe(409);
    expect(r.body.error).toEqual({ code: 'invalid_state', message: 'a compensation lease runs its compensate tool directly; it proposes no actions', details: { lease_id: comp.lease_id } });
    expect((await allEvents(d, run_id)).filter((e) => e.kind === 'action.decided').length).toBe(decidedBefore);
    expect((await d.kernel_(`/leases/${comp.lease_id}/complete`, { body: { output: { voided: true } } })).status).toBe(200);
    expect((await getRun(d, run_id)).state).toBe('abandoned');
  });
});
