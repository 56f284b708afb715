/**
 * Replay (interface 4.1, 6; decisions §7): a run with an approval, a rejection and an abandon
 * replays with a valid chain, a matching state and no decision mismatch; an edited policy
 * source, an edited event row and a deleted last event are each reported.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { allEvents, APPROVER, getRun, lease, leaseAndComplete, propose, pushBundle, pushPolicy, refundsBundle, REFUNDS_POLICY, runToAction, startRun, startRunDaemon, type RunDaemon } from './run-fixtures.js';

/** A run through approval, rejection, allow-after-approval, deny-after-rejection, then abandon with a compensation. */
async function eventfulRun(d: RunDaemon): Promise<{ run_id: string; approved: string; rejected: string }> {
  const b = refundsBundle();
  b.workflows.refund!.steps.push({ id: 'notify', kind: 'tool', tool: 'billing.lookup', args: { invoice_id: '{{input.invoice_id}}' } });
  await pushPolicy(d, 'refunds', '1', REFUNDS_POLICY);
  const { run_id } = await startRun(d, await pushBundle(d, b), { policy_set: ['refunds'] });
  await leaseAndComplete(d, { amount: 150 });
  await leaseAndComplete(d, { rows: [] });
  const big = { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 150 } };
  const bigger = { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 900 } };

  const l1 = (await lease(d, ['action'])).body;
  const approved = (await propose(d, l1.lease_id, big)).body.approval_id;
  await d.kernel_(`/approvals/${approved}`, { body: { decision: 'approved', actor: APPROVER, reason: 'ok' } });
  const l2 = (await lease(d, ['action'])).body;
  const rejected = (await propose(d, l2.lease_id, bigger)).body.approval_id;
  await d.kernel_(`/approvals/${rejected}`, { body: { decision: 'rejected', actor: APPROVER, reason: 'too much' } });
  const l3 = (await lease(d, ['action'])).body;
  expect((await propose(d, l3.lease_id, bigger)).status).toBe(403);
  expect((await propose(d, l3.lease_id, big)).body.rule).toBe(`approved:${approved}`);
  expect((await propose(d, l3.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 10 } })).body.rule).toBe('refunds/small_refund');
  await d.kernel_(`/runs/${run_id}/events`, { body: { kind: 'tool.called', payload: { tool: 'billing.refund', ok: true } }, headers: { 'x-svc-lease': l3.lease_id } });
  await d.kernel_(`/leases/${l3.lease_id}/complete`, { body: { output: { id: 'rf-5' }, usage: { tokens: 3, usd: 0.001 } } });
  const ab = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'customer withdrew', actor: { id: 'ops-1', role: 'ops' } } });
  expect(ab.body.compensations_scheduled).toBe(1);
  const c = (await lease(d, ['compensation'])).body;
  expect(c.step_def.args).toEqual({ refund_id: 'rf-5' });
  await d.kernel_(`/leases/${c.lease_id}/complete`, { body: { output: { voided: true } } });
  expect((await getRun(d, run_id)).state).toBe('abandoned');
  return { run_id, approved, rejected };
}

function openStore(d: RunDaemon): Database.Database {
  return new Database(join(d.dataDir, 'kernel.db'));
}

describe('POST /runs/{id}/replay (D §7)', () => {
  it('a run with an approval, a rejection and an abandon: valid chain, matching state, no decision mismatch', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await eventfulRun(d);
    const r = await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' });
    expect(r.status).toBe(200);
    const events = await allEvents(d, run_id);
    expect(r.body).toMatchObject({ chain_valid: true, events: events.length, state_matches: true, decisions: 5, decision_mismatches: [], chain_errors: [] });
    const stored = await getRun(d, run_id);
    expect(r.body.state).toEqual(stored);
    const kinds = new Set(events.map((e) => e.kind));
    for (const k of ['action.decided', 'approval.requested', 'approval.decided', 'run.parked', 'run.resumed', 'run.abandon_requested', 'compensation.completed', 'run.abandoned', 'tool.called']) expect(kinds).toContain(k);
  });

  it('altering the stored source of a pinned policy makes replay report the mismatch', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await eventfulRun(d);
    const db = openStore(d);
    db.prepare('UPDATE policies SET source = ? WHERE name = ? AND version = ?').run(REFUNDS_POLICY.replace('amount <= 100', 'amount <= 5').replace('amount > 100', 'amount > 1000'), 'refunds', '1');
    db.close();
    const r = (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;
    expect(r.chain_valid).toBe(true);
    expect(r.state_matches).toBe(true);
    const events = await allEvents(d, run_id);
    const policyDecisions = events.filter((e) => e.kind === 'action.decided' && e.payload.source === 'policy');
    // the two approval_required decisions are now no match (default rule), the small refund is no longer allowed by its rule
    expect(r.decision_mismatches.map((m: any) => m.seq)).toEqual(policyDecisions.map((e) => e.seq));
    expect(r.decision_mismatches[0]).toMatchObject({ recorded: { decision: 'approval_required', rule: 'refunds/large_refund' }, replayed: { decision: 'approval_required', rule: 'default/sor_write' } });
    expect(r.decision_mismatches[2]).toMatchObject({ recorded: { decision: 'allow', rule: 'refunds/small_refund' }, replayed: { rule: 'default/sor_write' } });
  });

  it('an event row edited in the SQLite file is reported at its seq (and the state no longer matches)', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await eventfulRun(d);
    const events = await allEvents(d, run_id);
    const target = events.find((e) => e.kind === 'step.completed' && e.payload.step === 'triage');
    const db = openStore(d);
    const row = db.prepare('SELECT payload FROM run_events WHERE run_id = ? AND seq = ?').get(run_id, target.seq) as { payload: string };
    const payload = JSON.parse(row.payload);
    payload.output.amount = 1;
    db.prepare('UPDATE run_events SET payload = ? WHERE run_id = ? AND seq = ?').run(JSON.stringify(payload), run_id, target.seq);
    db.close();
    const r = (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;
    expect(r.chain_valid).toBe(false);
    expect(r.chain_errors).toEqual([{ seq: target.seq, reason: 'hash_mismatch' }]);
    expect(r.state_matches).toBe(false);
    expect(r.state_differences).toContain('steps');
  });

  it('deleting the last event is reported as a head mismatch at the signed seq', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await eventfulRun(d);
    const last = (await getRun(d, run_id)).last_seq;
    const db = openStore(d);
    db.prepare('DELETE FROM run_events WHERE run_id = ? AND seq = ?').run(run_id, last);
    db.close();
    const r = (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;
    expect(r.chain_valid).toBe(false);
    expect(r.chain_errors).toEqual([{ seq: last, reason: 'head_mismatch', detail: `signed head is seq ${last}, log ends at seq ${last - 1}` }]);
    expect(r.events).toBe(last - 1);
    expect(r.state_matches).toBe(false);
    expect(r.state.state).toBe('abandoning');
  });

  it("a run row's columns edited beside its model (what lists, filters and counts read) are state differences", async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    await leaseAndComplete(d, { amount: 2 });
    const clean = (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;
    expect(clean).toMatchObject({ chain_valid: true, state_matches: true, state_differences: [] });
    const db = openStore(d);
    db.prepare("UPDATE runs SET state = 'completed', department = 'finance' WHERE run_id = ?").run(run_id);
    db.close();
    const r = (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;
    expect(r).toMatchObject({ chain_valid: true, state_matches: false, state_differences: ['runs.state', 'runs.department'] });
    expect(r.state.state).toBe('running'); // what the log says
  });

  it('a stored state that is not JSON: replay says runs.model; GET is a 500 internal, never a 400 blaming the request', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const db = openStore(d);
    db.prepare("UPDATE runs SET model = '{broken' WHERE run_id = ?").run(run_id);
    db.close();
    const r = await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ chain_valid: true, state_matches: false, state_differences: ['runs.model'] });
    const got = await d.kernel_(`/runs/${run_id}`);
    expect(got.status).toBe(500);
    expect(got.body.error.code).toBe('internal');
  });

  it('a row edited into invalid JSON is reported, never a 500; unknown runs are 404', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    await leaseAndComplete(d, { amount: 2 });
    const db = openStore(d);
    db.prepare('UPDATE run_events SET payload = ? WHERE run_id = ? AND seq = 2').run('{not json', run_id);
    db.close();
    const r = await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' });
    expect(r.status).toBe(200);
    expect(r.body.chain_errors).toEqual([{ seq: 2, reason: 'unparseable' }]);
    expect(r.body.state_matches).toBe(false);
    expect((await d.kernel_(`/runs/${run_id}/events`)).status).toBe(200);
    expect((await d.kernel_('/runs/run_nope/replay', { method: 'POST' })).status).toBe(404);
    // Valid JSON nested far deeper than svc writes (it would overflow the check's walks).
    const deep = openStore(d);
    deep.prepare('UPDATE run_events SET payload = ? WHERE run_id = ? AND seq = 2').run('['.repeat(200_000) + ']'.repeat(200_000), run_id);
    deep.close();
    const r2 = await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' });
    expect(r2.status).toBe(200);
    expect(r2.body.chain_errors).toEqual([{ seq: 2, reason: 'unparseable' }]);
  });

  // What the kernel acts on beside the log: the run's remit (decisions §3: a signed token; the
  // kernel decides under its copy in runs.remit_payload) and the approvals table (D 5.4).
  it('a remit copy widened in the run row is reported, and so is the decision the kernel made under it (D §3, D §7)', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d, { policy_set: [] });
    const db = openStore(d);
    const remit = JSON.parse((db.prepare('SELECT remit_payload FROM runs WHERE run_id = ?').get(run_id) as { remit_payload: string }).remit_payload);
    db.prepare('UPDATE runs SET remit_payload = ? WHERE run_id = ?').run(JSON.stringify({ ...remit, autonomy: 'autonomous' }), run_id);
    db.close();
    // No policy pinned: the default rule asks for approval of a write to a system of record unless autonomous.
    const small = await propose(d, l.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 10 } });
    expect(small.body).toMatchObject({ decision: 'allow' });
    const r = (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;
    expect(r).toMatchObject({ chain_valid: true, state_matches: false });
    expect(r.state_differences).toEqual(['runs.remit_payload']);
    expect(r.decision_mismatches).toHaveLength(1);
    expect(r.decision_mismatches[0].recorded).toMatchObject({ decision: 'allow', rule: 'default/allow' });
    expect(r.decision_mismatches[0].replayed).toMatchObject({ decision: 'approval_required', rule: 'default/sor_write' });
    expect(r.decision_mismatches[0].replayed.error).toMatch(/other than the run's signed remit/);
  });

  it("a run row's remit token that does not verify is runs.remit_token (D §3)", async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const db = openStore(d);
    const token = (db.prepare('SELECT remit_token FROM runs WHERE run_id = ?').get(run_id) as { remit_token: string }).remit_token;
    const [prefix, keyId, payload, sig] = token.split('.');
    const widened = { ...JSON.parse(Buffer.from(payload!, 'base64url').toString()), autonomy: 'autonomous' };
    db.prepare('UPDATE runs SET remit_token = ? WHERE run_id = ?').run([prefix, keyId, Buffer.from(JSON.stringify(widened)).toString('base64url'), sig].join('.'), run_id);
    db.close();
    const r = (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;
    expect(r).toMatchObject({ chain_valid: true, state_matches: false, state_differences: ['runs.remit_token'] });
  });

  it('an approval row edited beside the log (action shown, approver, state, decider) is reported by column (D 5.4, D §7)', async () => {
    await using d = await startRunDaemon();
    const { run_id, approved, rejected } = await eventfulRun(d);
    const db = openStore(d);
    db.prepare('UPDATE approvals SET action = ? WHERE approval_id = ?').run('{"tool":"billing.refund","args":{"amount":1}}', approved);
    db.prepare("UPDATE approvals SET state = 'approved', decision = 'approved', actor = ? WHERE approval_id = ?").run('{"id":"mallory","role":"finance"}', rejected);
    db.close();
    const r = (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;
    expect(r).toMatchObject({ chain_valid: true, state_matches: false, decision_mismatches: [] });
    expect(r.state_differences).toEqual([`approvals.${approved}.action`, `approvals.${rejected}.state`, `approvals.${rejected}.decision`, `approvals.${rejected}.actor`]);
  });

  it("an approval decided by a role the log's request did not name (approver edited in the table) is a decision mismatch (D 5.4)", async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const action = { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 150 } };
    const approvalId = (await propose(d, l.lease_id, action)).body.approval_id;
    const db = openStore(d);
    db.prepare("UPDATE approvals SET approver = 'role:ops' WHERE approval_id = ?").run(approvalId);
    db.close();
    expect((await d.kernel_(`/approvals/${approvalId}`, { body: { decision: 'approved', actor: { id: 'ops-1', role: 'ops' } } })).status).toBe(200);
    const again = (await lease(d, ['action'])).body;
    expect((await propose(d, again.lease_id, action)).body).toMatchObject({ decision: 'allow', rule: `approved:${approvalId}` });
    const r = (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;
    expect(r.chain_valid).toBe(true);
    expect(r.state_differences).toEqual([`approvals.${approvalId}.approver`]);
    expect(r.decision_mismatches).toHaveLength(1);
    expect(r.decision_mismatches[0]).toMatchObject({ recorded: { decision: 'allow' }, replayed: { decision: 'approval_required', error: `approval ${approvalId} was decided by role:ops, not by its approver role:finance` } });
  });

  it("an approval by the run's own requester, let through by a requester edited in the run row, is a decision mismatch (D 5.4 no self-approval, D §7)", async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const action = { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 150 } };
    const approvalId = (await propose(d, l.lease_id, action)).body.approval_id;
    // The requester ana may not approve; an insider renames the run's requester in its row.
    expect((await d.kernel_(`/approvals/${approvalId}`, { body: { decision: 'approved', actor: { id: 'ana', role: 'finance' } } })).body.error.details.reason).toBe('self_approval');
    const db = openStore(d);
    const model = JSON.parse((db.prepare('SELECT model FROM runs WHERE run_id = ?').get(run_id) as { model: string }).model);
    db.prepare('UPDATE runs SET model = ? WHERE run_id = ?').run(JSON.stringify({ ...model, requested_by: { ...model.requested_by, id: 'someone-else' } }), run_id);
    db.close();
    expect((await d.kernel_(`/approvals/${approvalId}`, { body: { decision: 'approved', actor: { id: 'ana', role: 'finance' } } })).status).toBe(200);
    const again = (await lease(d, ['action'])).body;
    expect((await propose(d, again.lease_id, action)).body).toMatchObject({ decision: 'allow', rule: `approved:${approvalId}` });
    const r = (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;
    // The log itself is intact: only replay's re-decision, read from the log, finds it.
    expect(r.chain_valid).toBe(true);
    expect(r.decision_mismatches).toEqual([
      expect.objectContaining({
        recorded: { decision: 'allow', rule: `approved:${approvalId}`, approver: 'role:finance' },
        replayed: { decision: 'approval_required', rule: 'refunds/large_refund', approver: 'role:finance', error: `approval ${approvalId} was decided by the run's requester ana` },
      }),
    ]);
  });

  it('an allow that claims an approval the log never decided is a decision mismatch, whatever the hashes say (D 5.4, D §7)', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const action = { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 150 } };
    const approvalId = (await propose(d, l.lease_id, action)).body.approval_id;
    await d.kernel_(`/approvals/${approvalId}`, { body: { decision: 'approved', actor: APPROVER } });
    const again = (await lease(d, ['action'])).body;
    expect((await propose(d, again.lease_id, action)).body.rule).toBe(`approved:${approvalId}`);
    const events = await allEvents(d, run_id);
    const [proposed, allowed] = events.filter((e) => e.kind === 'action.decided');
    const approvalDecided = events.find((e) => e.kind === 'approval.decided')!;
    const edit = (seq: number, f: (row: { kind: string; payload: any }) => { kind: string; payload: unknown }) => {
      const db = openStore(d);
      const row = db.prepare('SELECT kind, payload FROM run_events WHERE run_id = ? AND seq = ?').get(run_id, seq) as { kind: string; payload: string };
      const next = f({ kind: row.kind, payload: JSON.parse(row.payload) });
      db.prepare('UPDATE run_events SET kind = ?, payload = ? WHERE run_id = ? AND seq = ?').run(next.kind, JSON.stringify(next.payload), run_id, seq);
      db.close();
    };
    const replay = async () => (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;

    // The decision event wiped (rewritten as a note): the allow after it stands on a pending approval.
    edit(approvalDecided.seq, () => ({ kind: 'note', payload: { text: 'nothing to see' } }));
    const undecided = await replay();
    expect(undecided.chain_errors).toEqual([{ seq: approvalDecided.seq, reason: 'hash_mismatch' }]);
    expect(undecided.decision_mismatches).toEqual([
      expect.objectContaining({ seq: allowed!.seq, recorded: expect.objectContaining({ decision: 'allow' }), replayed: { decision: 'approval_required', rule: 'refunds/large_refund', approver: 'role:finance' } }),
    ]);
    // The first proposal rewritten to an allow through the approval it only went on to request.
    edit(proposed!.seq, ({ payload }) => ({ kind: 'action.decided', payload: { ...payload, source: 'approval', decision: 'allow', rule: `approved:${approvalId}` } }));
    const early = await replay();
    expect(early.decision_mismatches).toContainEqual(
      expect.objectContaining({ seq: proposed!.seq, replayed: { decision: null, rule: null, approver: null, error: `no approval ${approvalId} for action ${proposed!.payload.action_id} earlier in the log` } }),
    );
    // An approval id the log never requested.
    edit(allowed!.seq, ({ payload }) => ({ kind: 'action.decided', payload: { ...payload, approval_id: 'apr_forged', rule: 'approved:apr_forged' } }));
    expect((await replay()).decision_mismatches).toContainEqual(
      expect.objectContaining({ seq: allowed!.seq, replayed: expect.objectContaining({ decision: null, error: `no approval apr_forged for action ${allowed!.payload.action_id} earlier in the log` }) }),
    );
  });

  it('values svc never writes, edited into a row, are reported at their seq or column, never a 500 (I §7, D §7)', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await eventfulRun(d);
    const events = await allEvents(d, run_id);
    const [first, second, third] = events.filter((e) => e.kind === 'action.decided').map((e) => e.seq);
    const db = openStore(d);
    const payloadOf = (seq: number) => JSON.parse((db.prepare('SELECT payload FROM run_events WHERE run_id = ? AND seq = ?').get(run_id, seq) as { payload: string }).payload);
    db.prepare('UPDATE run_events SET payload = ? WHERE run_id = ? AND seq = ?').run('null', run_id, first);
    db.prepare('UPDATE run_events SET payload = ? WHERE run_id = ? AND seq = ?').run(JSON.stringify({ ...payloadOf(second!), approver: 5 }), run_id, second);
    db.prepare('UPDATE run_events SET payload = ? WHERE run_id = ? AND seq = ?').run(JSON.stringify({ ...payloadOf(third!), lease_id: 7 }).replace(':7', ':1e400'), run_id, third);
    db.prepare('UPDATE runs SET remit_payload = ? WHERE run_id = ?').run('{"spend":1e400}', run_id);
    db.close();
    const r = await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' });
    expect(r.status).toBe(200);
    expect(r.body.chain_errors).toEqual([
      { seq: first, reason: 'unparseable' },
      { seq: second, reason: 'hash_mismatch' },
      { seq: third, reason: 'hash_mismatch' },
    ]);
    expect(r.body.decision_mismatches.map((m: any) => m.seq)).toContain(second);
    expect(r.body.state_differences).toContain('runs.remit_payload');
  });

  it("a run's bundle edited in the store after the run pinned it no longer has the run's content address: bundles.<id> (D §4)", async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    const { run_id } = await startRun(d, bundleId);
    const db = openStore(d);
    const body = (db.prepare('SELECT body FROM bundles WHERE bundle_id = ?').get(bundleId) as { body: string }).body;
    db.prepare('UPDATE bundles SET body = ? WHERE bundle_id = ?').run(body.replace('billing.void_refund', 'billing.refund'), bundleId);
    db.close();
    const r = (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;
    expect(r).toMatchObject({ chain_valid: true, state_matches: false, state_differences: [`bundles.${bundleId}`] });
  });
});

describe('replay and cancelled_approval_ids in a posted event (D §7; review 26)', () => {
  it('an untouched run with a pending approval replays clean when a worker posts a note naming it cancelled', async () => {
    await using d = await startRunDaemon();
    const { run_id, lease: l } = await runToAction(d);
    const approvalId = (await propose(d, l.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 150 } })).body.approval_id;
    const posted = await d.kernel_(`/runs/${run_id}/events`, {
      body: { kind: 'note', payload: { text: 'hello', cancelled_approval_ids: [approvalId] } },
      headers: { 'x-svc-remit': l.context.remit_token },
    });
    expect(posted.status, JSON.stringify(posted.body)).toBe(201);
    const r = (await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' })).body;
    expect(r).toMatchObject({ chain_valid: true, state_matches: true, state_differences: [] });
  });
});
