/**
 * Runs over HTTP against the real svcd: interface 2.4, 2.6, 3, 4.1 (POST/GET /runs, leases,
 * complete), decisions §6 (state object, list pagination), §7 (events), §8 (spend).
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { allEvents, getRun, lease, leaseAndComplete, mintRemit, pushBundle, refundsBundle, REQUESTER, startRun, startRunDaemon } from './run-fixtures.js';

describe('a whole run over HTTP (I 2.4, 2.6, 4.1; D §6)', () => {
  it('runs triage → lookup → refund to completed with every step output, usage and a signed head', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    const { run_id, remit_id } = await startRun(d, bundleId, { autonomy: 'autonomous' });
    expect(run_id).toMatch(/^run_[0-9A-HJKMNP-TV-Z]{26}$/);

    const created = await getRun(d, run_id);
    expect(created).toMatchObject({
      run_id,
      state: 'running',
      parked_reason: null,
      bundle_id: bundleId,
      bundle: { name: 'refunds', version: '1.0.0' },
      workflow: 'refund',
      department: 'support',
      input: { invoice_id: 'inv-1', ticket: 'please refund' },
      requested_by: REQUESTER,
      remit_id,
      policies: [],
      current_step: 'triage',
      usage: { tokens: 0, usd: 0 },
      budget: { tokens: 100_000, usd: 5 },
      pending_approval_id: null,
      output: null,
      error: null,
      last_seq: 1,
    });
    expect(created.steps.triage).toEqual({ state: 'pending', attempt: 1, output: null, error: null, started_at: null, ended_at: null });
    expect(created.head_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(created.head_signature).toMatch(/^[A-Za-z0-9_-]{86}$/);

    const t = await leaseAndComplete(d, { category: 'refund', amount: 42 }, { tokens: 100, usd: 0.02 });
    expect(t.lease).toMatchObject({ run_id, step: 'triage', kind: 'model', attempt: 1, heartbeat_seconds: 20, ttl_seconds: 60 });
    expect(t.lease.step_def).toMatchObject({ id: 'triage', kind: 'model', prompt: 'triage' });
    const ctx = t.lease.context;
    expect(ctx.input).toEqual({ invoice_id: 'inv-1', ticket: 'please refund' });
    expect(ctx.steps).toEqual({});
    expect(ctx.run).toMatchObject({ id: run_id, bundle: 'refunds', workflow: 'refund', requested_by: REQUESTER, department: 'support' });
    expect(ctx.remit_token).toMatch(/^krt1\./);
    expect(ctx.remit).toEqual({ autonomy: 'autonomous', grants: [], tools: ['billing.*'], scopes: ['sql:table:*'] });
    expect(ctx.prompts).toEqual({ triage: 'Classify this ticket: {{input.ticket}}' });
    expect(ctx.mock.triage.output).toEqual({ category: 'refund', amount: 50 });
    expect(ctx.pacing).toEqual({ model: { max_concurrent: 2, min_interval_ms: 0 } });
    expect(ctx.tools.map((x: any) => x.id)).toEqual(['billing.lookup']);
    expect(ctx.approved_actions).toEqual([]);
    expect(ctx.prior_events).toEqual([]);
    expect(ctx.budget).toEqual({ tokens: 100_000, usd: 5, used_tokens: 0, used_usd: 0 });
    expect(t.done).toEqual({ run_state: 'running', next_step: 'lookup' });

    const l = await leaseAndComplete(d, { rows: [{ id: 'inv-1' }] });
    expect(l.lease.step_def.args).toEqual({ invoice_id: 'inv-1' });
    expect(l.lease.context.steps).toEqual({ triage: { output: { category: 'refund', amount: 42 } } });
    expect(l.done).toEqual({ run_state: 'running', next_step: 'refund' });

    const r = await leaseAndComplete(d, { id: 'rf-9' });
    expect(r.lease.step_def.args).toEqual({ invoice_id: 'inv-1', amount: 42 });
    expect(r.done).toEqual({ run_state: 'completed', next_step: null });

    const done = await getRun(d, run_id);
    expect(done.state).toBe('completed');
    expect(done.output).toEqual({ id: 'rf-9' });
    expect(done.current_step).toBeNull();
    expect(done.usage).toEqual({ tokens: 120, usd: 0.04 });
    for (const id of ['triage', 'lookup', 'refund']) expect(done.steps[id]).toMatchObject({ state: 'completed', attempt: 1 });
    const kinds = (await allEvents(d, run_id)).map((e) => e.kind);
    expect(kinds).toEqual(['run.created', 'step.leased', 'step.completed', 'step.leased', 'step.completed', 'step.leased', 'step.completed', 'run.completed']);
    expect(done.last_seq).toBe(8);

    const replay = await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' });
    expect(replay.body).toMatchObject({ chain_valid: true, events: 8, state_matches: true, decisions: 0, decision_mismatches: [], chain_errors: [] });
    expect(await lease(d)).toMatchObject({ status: 204 });
  });
});

describe('POST /runs input against the workflow schema (I 4.1 rule 2)', () => {
  it('multipleOf holds for decimal amounts binary floating point cannot divide exactly (19.99 of 0.01)', async () => {
    await using d = await startRunDaemon();
    const bundle = refundsBundle();
    bundle.workflows.refund!.input_schema = { type: 'object', required: ['invoice_id'], properties: { invoice_id: { type: 'string' }, amount: { type: 'number', multipleOf: 0.01 } } };
    const bundleId = await pushBundle(d, bundle);
    const start = async (amount: number) =>
      d.kernel_('/runs', { body: { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'inv-1', amount }, remit_id: (await mintRemit(d)).remit_id, requested_by: REQUESTER } });
    for (const amount of [19.99, 0.07, 4.35, 1234567.89, 0.1]) expect((await start(amount)).status, String(amount)).toBe(201);
    const off = await start(19.995);
    expect(off.status).toBe(422);
    expect(off.body.error).toMatchObject({ code: 'input_invalid', details: { path: '/amount' } });
  });

  it('a schema keeping its $id in the next bundle version (or another workflow) still checks runs of both', async () => {
    await using d = await startRunDaemon();
    const schema = { $id: 'https://example.com/schemas/refund-input.json', type: 'object', required: ['invoice_id'], properties: { invoice_id: { type: 'string' } } };
    const ids: string[] = [];
    for (const version of ['1.0.0', '1.0.1']) {
      const bundle = refundsBundle({ version });
      bundle.workflows.refund!.input_schema = structuredClone(schema);
      ids.push(await pushBundle(d, bundle));
    }
    for (const bundleId of ids) {
      const start = async (input: unknown) => d.kernel_('/runs', { body: { bundle_id: bundleId, workflow: 'refund', input, remit_id: (await mintRemit(d)).remit_id, requested_by: REQUESTER } });
      expect((await start({ invoice_id: 'inv-1' })).status, bundleId).toBe(201);
      const bad = await start({ invoice_id: 7 });
      expect(bad.status).toBe(422);
      expect(bad.body.error).toMatchObject({ code: 'input_invalid', details: { path: '/invoice_id' } });
    }
  });

  it('details.path names a member the schema does not allow, as request_invalid does', async () => {
    await using d = await startRunDaemon();
    const bundle = refundsBundle();
    bundle.workflows.refund!.input_schema = { type: 'object', additionalProperties: false, required: ['invoice_id'], properties: { invoice_id: { type: 'string' } } };
    const bundleId = await pushBundle(d, bundle);
    const res = await d.kernel_('/runs', { body: { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'inv-1', 'a/b': 1 }, remit_id: (await mintRemit(d)).remit_id, requested_by: REQUESTER } });
    expect(res.status).toBe(422);
    expect(res.body.error).toMatchObject({ code: 'input_invalid', details: { path: '/a~1b', errors: [{ path: '/a~1b', message: 'is not allowed' }] } });
  });
});

describe('POST /runs refusals (I 4.1 rule 2, 7.1; D §3, §10)', () => {
  it('checks the bundle, workflow, input schema, requester and remit binding', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    const remit = await mintRemit(d);
    const base = { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'inv-1' }, remit_id: remit.remit_id, requested_by: REQUESTER };

    const badInput = await d.kernel_('/runs', { body: { ...base, input: { invoice: 5 } } });
    expect(badInput.status).toBe(422);
    expect(badInput.body.error.code).toBe('input_invalid');
    expect(badInput.body.error.details.errors[0]).toEqual({ path: '/invoice_id', message: 'is required' });
    expect(badInput.body.error.details.path).toBe('/invoice_id'); // the first problem's pointer, as request_invalid has it
    expect(badInput.body.error.message).toBe('input does not match the input schema of workflow refund: /invoice_id is required');

    const mismatch = await d.kernel_('/runs', { body: { ...base, requested_by: { ...REQUESTER, manager: 'nobody' } } });
    expect(mismatch.status).toBe(422);
    expect(mismatch.body.error.code).toBe('requester_mismatch');

    const noBundle = await d.kernel_('/runs', { body: { ...base, bundle_id: 'bnd_nope' } });
    expect(noBundle.status).toBe(404);
    expect(noBundle.body.error.details).toEqual({ resource: 'bundle', id: 'bnd_nope' });
    const noWorkflow = await d.kernel_('/runs', { body: { ...base, workflow: 'nope' } });
    expect(noWorkflow.status).toBe(404);
    expect(noWorkflow.body.error.code).toBe('not_found');
    expect(noWorkflow.body.error.details).toMatchObject({ resource: 'workflow', id: 'nope', workflows: ['refund'] });
    const noRemit = await d.kernel_('/runs', { body: { ...base, remit_id: 'rmt_nope' } });
    expect(noRemit.status).toBe(404);

    // requested_by defaults to the remit's requester
    const { requested_by: _r, ...withoutRequester } = base;
    const ok = await d.kernel_('/runs', { body: withoutRequester });
    expect(ok.status).toBe(201);
    expect(ok.body).toEqual({ run_id: expect.stringMatching(/^run_/), state: 'running' });
    expect((await d.kernel_(`/remits/${remit.remit_id}`)).body.run_id).toBe(ok.body.run_id);

    const again = await d.kernel_('/runs', { body: base });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('remit_bound');
    expect(again.body.error.message).toBe(`remit ${remit.remit_id} is already bound to run ${ok.body.run_id} (a remit serves one run: mint or derive another for this one)`);

    for (const body of [{}, { ...base, bundle_id: 5 }, { ...base, requested_by: { id: 'ana' } }, '[]']) {
      const r = await d.kernel_('/runs', { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.code).toBe('request_invalid');
    }
    expect((await d.kernel_('/runs/run_nope')).status).toBe(404);
  });

  it('a remit not yet valid, or expired, starts no run: 422 remit_invalid with details.reason, and the remit stays free (docs/design.md "Remits and keys": binding; D §3 skew)', async () => {
    const clock = new ManualClock();
    await using d = await startRunDaemon({ clock, clockSkewSeconds: 30 });
    const bundleId = await pushBundle(d);
    const parent = await mintRemit(d, { ttl_seconds: 3600 });
    const nowS = Math.floor(clock.now() / 1000);
    const child = (await d.kernel_(`/remits/${parent.remit_id}/derive`, { body: { nbf: nowS + 600, spend: { tokens: 10, usd: 0.01 } } })).body;
    const body = { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'inv-1' }, remit_id: child.remit_id, requested_by: REQUESTER };

    const early = await d.kernel_('/runs', { body });
    expect(early.status, JSON.stringify(early.body)).toBe(422);
    expect(early.body.error).toMatchObject({
      code: 'remit_invalid',
      message: `remit ${child.remit_id} is not valid before ${new Date((nowS + 600) * 1000).toISOString()}`,
      details: { remit_id: child.remit_id, reason: 'remit_not_yet_valid' },
    });
    expect((await d.kernel_(`/remits/${child.remit_id}`)).body.run_id).toBeNull();
    expect((await d.kernel_('/runs')).body.runs).toEqual([]);
    // Within the configured skew of its nbf it is valid: the run starts and binds it.
    clock.advance((600 - 30) * 1000);
    const inSkew = await d.kernel_('/runs', { body });
    expect(inSkew.status, JSON.stringify(inSkew.body)).toBe(201);
    expect((await d.kernel_(`/remits/${child.remit_id}`)).body.run_id).toBe(inSkew.body.run_id);

    // Past its exp (plus the skew) the parent starts nothing either.
    clock.advance((3600 - 570 + 30) * 1000);
    const late = await d.kernel_('/runs', { body: { ...body, remit_id: parent.remit_id } });
    expect(late.status, JSON.stringify(late.body)).toBe(422);
    expect(late.body.error).toMatchObject({ code: 'remit_invalid', details: { remit_id: parent.remit_id, reason: 'remit_expired' } });
    expect((await d.kernel_(`/remits/${parent.remit_id}`)).body.run_id).toBeNull();
    expect((await d.kernel_('/runs')).body.runs.map((r: { run_id: string }) => r.run_id)).toEqual([inSkew.body.run_id]);
  });

  it('pins the latest policy version at creation, or the named one (D 5.2)', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    await d.kernel_('/policies', { body: { name: 'p', version: '1', source: 'allow a when action.tool == "x"\n' } });
    await d.kernel_('/policies', { body: { name: 'p', version: '2', source: 'allow a when action.tool == "y"\n' } });
    await d.kernel_('/policies', { body: { name: 'q', version: '1', source: 'allow b when action.tool == "z"\n' } });
    const { run_id } = await startRun(d, bundleId, { policy_set: ['p', 'q@1'] });
    expect((await getRun(d, run_id)).policies).toEqual([
      { name: 'p', version: '2' },
      { name: 'q', version: '1' },
    ]);
    const missing = await mintRemit(d, { policy_set: ['nope'] });
    const r = await d.kernel_('/runs', { body: { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'x' }, remit_id: missing.remit_id } });
    expect(r.status).toBe(422);
    expect(r.body.error.code).toBe('policy_not_found');
  });
});

describe('GET /runs (D §6)', () => {
  it('lists newest first with state and department filters and opaque cursors; next is null on the last page', async () => {
    await using d = await startRunDaemon();
    const support = await pushBundle(d);
    const ops = await pushBundle(d, refundsBundle({ version: '2.0.0', department: 'ops' }));
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await startRun(d, i % 2 ? ops : support)).run_id);
    await leaseAndComplete(d, { amount: 1 }, undefined, ['model']); // the oldest run moves on, still running
    const l = await lease(d, ['model']);
    await d.kernel_(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'bad', message: 'x' }, deterministic: true } }); // ids[1] parked

    const all = (await d.kernel_('/runs')).body;
    expect(all.runs.map((r: any) => r.run_id)).toEqual([...ids].reverse());
    expect(all.next).toBeNull();
    expect(all.runs[0]).toEqual(await getRun(d, ids[4]!));

    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const q: string = after ? `?limit=2&after=${encodeURIComponent(after)}` : '?limit=2';
      const page: any = (await d.kernel_(`/runs${q}`)).body;
      expect(page.runs.length).toBeLessThanOrEqual(2);
      seen.push(...page.runs.map((r: any) => r.run_id));
      after = page.next;
      pages++;
    } while (after);
    expect(seen).toEqual([...ids].reverse());
    expect(pages).toBe(3);

    expect((await d.kernel_('/runs?state=parked')).body.runs.map((r: any) => r.run_id)).toEqual([ids[1]]);
    expect((await d.kernel_('/runs?department=ops')).body.runs.map((r: any) => r.run_id)).toEqual([ids[3], ids[1]]);
    expect((await d.kernel_('/runs?department=ops&state=running')).body.runs.map((r: any) => r.run_id)).toEqual([ids[3]]);
    for (const q of ['state=sleeping', 'limit=0', 'limit=501', 'limit=ten', 'after=not-a-cursor']) {
      const r = await d.kernel_(`/runs?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.body.error.code).toBe('request_invalid');
    }
    expect((await d.kernel_('/health')).body.runs).toEqual({ running: 4, parked: 1 });
    const metrics = (await d.kernel_('/metrics')).body as string;
    expect(metrics).toMatch(/^svc_runs\{state="running"\} 4$/m);
    expect(metrics).toMatch(/^svc_runs\{state="parked"\} 1$/m);
    expect(metrics).toMatch(/^svc_runs\{state="completed"\} 0$/m);
    expect(metrics).toMatch(/^svc_steps_leased_total 2$/m);
    expect(metrics).toMatch(/^svc_step_latency_seconds_count 1$/m);
    expect(metrics).toMatch(/^svc_usage_usd_total\{department="support"\} 0.01$/m);
  });
});

describe('spend (D §8, I 4.1 rules 5–6)', () => {
  it('usage over the remit spend fails the run with budget_exhausted and a budget.exceeded event', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d), { spend: { tokens: 1000, usd: 1 } });
    const t = await leaseAndComplete(d, { amount: 1 }, { tokens: 600, usd: 0.5 });
    expect(t.done).toEqual({ run_state: 'running', next_step: 'lookup' });
    const l = await lease(d, ['tool']);
    expect(l.body.context.budget).toEqual({ tokens: 1000, usd: 1, used_tokens: 600, used_usd: 0.5 });
    const f = await d.kernel_(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'upstream_error', message: 'x' }, usage: { tokens: 0, usd: 0.6 } } });
    expect(f.body).toMatchObject({ outcome: 'quarantined', run_state: 'failed' });
    const run = await getRun(d, run_id);
    expect(run).toMatchObject({ state: 'failed', error: { code: 'budget_exhausted' }, usage: { tokens: 600, usd: 1.1 } });
    const events = await allEvents(d, run_id);
    expect(events.slice(-2).map((e) => e.kind)).toEqual(['budget.exceeded', 'run.failed']);
    expect(events[events.length - 2].payload).toEqual({ step: 'lookup', usage: { tokens: 600, usd: 1.1 }, budget: { tokens: 1000, usd: 1 }, reserved: { tokens: 0, usd: 0 } });
    expect((await lease(d)).status).toBe(204);
  });

  it('a sub-run only through derive: it records its parent, its spend is reserved from the parent budget', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    const parent = await startRun(d, bundleId, { spend: { tokens: 1000, usd: 1 } });
    await leaseAndComplete(d, { amount: 1 }, { tokens: 500, usd: 0.25 }); // parent usage 500 of 1000

    // D §3: reserved from the parent's remaining budget, which its run's usage has cut to 500
    // tokens and 0.75 usd (D 8.3: more is remit_widens on spend).
    const over = await d.kernel_(`/remits/${parent.remit_id}/derive`, { body: { spend: { tokens: 600, usd: 0.5 } } });
    expect(over.status).toBe(422);
    expect(over.body.error).toMatchObject({ code: 'remit_widens', details: { field: 'spend', available: { tokens: 500, usd: 0.75 } } });
    const derived = await d.kernel_(`/remits/${parent.remit_id}/derive`, { body: { spend: { tokens: 400, usd: 0.5 } } });
    expect(derived.status).toBe(201);
    const child = await d.kernel_('/runs', { body: { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'inv-2' }, remit_id: derived.body.remit_id } });
    expect(child.status).toBe(201);
    const childRun = await getRun(d, child.body.run_id);
    expect(childRun).toMatchObject({ parent_run_id: parent.run_id, budget: { tokens: 400, usd: 0.5 }, requested_by: REQUESTER });
    // Inheriting takes only what is left: 100 tokens, 0.25 usd.
    const rest = await d.kernel_(`/remits/${parent.remit_id}/derive`, { body: {} });
    expect(rest.status).toBe(201);
    expect((await d.kernel_(`/remits/${rest.body.remit_id}`)).body.spend).toEqual({ tokens: 100, usd: 0.25 });

    // The parent keeps running on what it has not handed out: 500 used of 1000 − 500 reserved.
    const next = await lease(d, ['model', 'tool']);
    expect(next.body.run_id).toBe(parent.run_id);
    // The lease shows that line: the remit's spend less the children's reservations (D §8, 8.3).
    expect(next.body.context.budget).toEqual({ tokens: 500, usd: 0.25, used_tokens: 500, used_usd: 0.25 });
    // One token more than that, and it fails: the reservations are the children's.
    const done = await d.kernel_(`/leases/${next.body.lease_id}/complete`, { body: { output: { amount: 1 }, usage: { tokens: 1, usd: 0 } } });
    expect(done.body).toEqual({ run_state: 'failed', next_step: null });
    const p = await getRun(d, parent.run_id);
    expect(p).toMatchObject({ state: 'failed', error: { code: 'budget_exhausted' } });
    expect(p.error.message).toContain('less {"tokens":500,"usd":0.75} reserved by derived remits');
    const exceeded = (await allEvents(d, parent.run_id)).find((e) => e.kind === 'budget.exceeded');
    expect(exceeded.payload).toMatchObject({ usage: { tokens: 501 }, budget: { tokens: 1000 }, reserved: { tokens: 500, usd: 0.75 } });
    // The child runs on its reservation.
    const c = await lease(d, ['model', 'tool']);
    expect(c.body.run_id).toBe(child.body.run_id);
    // The parent is one token over what it kept: a derive naming usd alone is checked on usd
    // alone, and inherits the tokens left, none.
    const usdOnly = await d.kernel_(`/remits/${parent.remit_id}/derive`, { body: { spend: { usd: 0 } } });
    expect(usdOnly.status, JSON.stringify(usdOnly.body)).toBe(201);
    expect((await d.kernel_(`/remits/${usdOnly.body.remit_id}`)).body.spend).toEqual({ tokens: 0, usd: 0 });
    // Asking for nothing outright is no widening either, though the parent is past zero
    // (D 8.3: only more than is left is remit_widens); one token is.
    const zero = await d.kernel_(`/remits/${parent.remit_id}/derive`, { body: { spend: { tokens: 0, usd: 0 } } });
    expect(zero.status, JSON.stringify(zero.body)).toBe(201);
    const one = await d.kernel_(`/remits/${parent.remit_id}/derive`, { body: { spend: { tokens: 1, usd: 0 } } });
    expect(one.status).toBe(422);
    expect(one.body.error).toMatchObject({ code: 'remit_widens', details: { field: 'spend', available: { tokens: 0, usd: 0 } } });
  });
});
