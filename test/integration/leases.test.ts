/**
 * Leases over HTTP (interface 2.6, 3 lease rows, 4.1; decisions §6): long polls, heartbeats,
 * expiry and re-lease with attempt + 1, retries with backoff and jitter, quarantine and
 * resume, connector_quarantined, output_schema, templates rendered at lease time.
 */
import { describe, expect, it } from 'vitest';
import { allEvents, getRun, lease, leaseAndComplete, pushBundle, refundsBundle, sleep, startRun, startRunDaemon, fourWorkersOverEightRuns } from './run-fixtures.js';

describe('long polls (D §6 wait_seconds)', () => {
  it('a waiting lease request returns within a second of a run being created', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    const started = Date.now();
    const pending = lease(d, ['model'], { wait_seconds: 10 });
    await sleep(300);
    const createdAt = Date.now();
    const { run_id } = await startRun(d, bundleId);
    const got = await pending;
    const answeredAt = Date.now();
    expect(got.status).toBe(200);
    expect(got.body.run_id).toBe(run_id);
    expect(answeredAt - createdAt).toBeLessThan(1000);
    expect(createdAt - started).toBeGreaterThanOrEqual(290); // a timer may fire a ms early by Date.now()
  });

  it('a waiting lease request gets a step whose lease expires meanwhile, soon after it expires', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    const { run_id } = await startRun(d, bundleId);
    const first = await lease(d, ['model'], { ttl_seconds: 1 });
    const leasedAt = Date.now();
    expect(first.body).toMatchObject({ run_id, attempt: 1 });
    const again = await lease(d, ['model'], { wait_seconds: 5 });
    const waited = Date.now() - leasedAt;
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ run_id, attempt: 2 });
    expect(waited).toBeGreaterThanOrEqual(950);
    expect(waited).toBeLessThan(1800); // not the sweeper's tick nor wait_seconds: woken for the expiry
  });

  it('an idle request answers 204 after wait_seconds, and at once without it', async () => {
    await using d = await startRunDaemon();
    let t = Date.now();
    expect((await lease(d)).status).toBe(204);
    expect(Date.now() - t).toBeLessThan(500);
    t = Date.now();
    const r = await lease(d, ['tool'], { wait_seconds: 1 });
    expect(r.status).toBe(204);
    expect(Date.now() - t).toBeGreaterThanOrEqual(950);
  });

  it('a client that goes away stops waiting, and the work stays for the next worker', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    const gone = new AbortController();
    const req = fetch(`${d.kernelUrl}/v1/leases`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ worker_id: 'w', kinds: ['model'], wait_seconds: 20 }), signal: gone.signal }).catch(() => null);
    await sleep(200);
    expect(d.kernel!.runs.notifier.waiting).toBe(1);
    gone.abort();
    await req;
    await sleep(100);
    expect(d.kernel!.runs.notifier.waiting).toBe(0);
    const { run_id } = await startRun(d, bundleId);
    expect((await lease(d, ['model'])).body).toMatchObject({ run_id, attempt: 1 });
  });

  it('a drain does not wait for long polls', async () => {
    const d = await startRunDaemon();
    const pending = lease(d, ['model'], { wait_seconds: 30 });
    await sleep(200);
    const t = Date.now();
    await d[Symbol.asyncDispose]();
    expect(Date.now() - t).toBeLessThan(3000);
    expect((await pending.catch(() => ({ status: 0 }))).status).not.toBe(200);
  });

  it('only hands out the kinds asked for, oldest ready first', async () => {
    await using d = await startRunDaemon();
    const bundleId = await pushBundle(d);
    const first = await startRun(d, bundleId);
    const second = await startRun(d, bundleId);
    expect((await lease(d, ['tool', 'action'])).status).toBe(204);
    const a = await lease(d, ['model']);
    const b = await lease(d, ['model']);
    expect([a.body.run_id, b.body.run_id]).toEqual([first.run_id, second.run_id]);
  });

  it('a request that names no kinds serves every kind, as one with no ttl_seconds gets the default (I 2.6; docs/design.md Leasing)', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const r = await d.kernel_('/leases', { body: { worker_id: 'w-any' } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ run_id, step: 'triage', attempt: 1 });
  });

  it('validates the request: kinds, ttl_seconds ≤ 3600, wait_seconds ≤ 30 (400 request_invalid)', async () => {
    await using d = await startRunDaemon();
    for (const body of [
      { worker_id: 'w', kinds: ['dance'] },
      { worker_id: 'w', kinds: [] },
      { worker_id: 'w', kinds: ['model'], ttl_seconds: 3601 },
      { worker_id: 'w', kinds: ['model'], ttl_seconds: 0 },
      { worker_id: 'w', kinds: ['model'], ttl_seconds: '60' },
      { worker_id: 'w', kinds: ['model'], wait_seconds: 31 },
      { kinds: ['model'] },
    ]) {
      const r = await d.kernel_('/leases', { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.error.code).toBe('request_invalid');
    }
  });
});

describe('concurrent workers (D §6)', () => {
  it('never hand one step to two workers; every run completes with a valid chain', async () => {
    await using d = await startRunDaemon();
    await fourWorkersOverEightRuns(d);
  });
});

describe('heartbeat and expiry (I 3 lease rows, D §6)', () => {
  it('ttl gives expires_at and heartbeat_seconds = floor(ttl/3) ≥ 1; heartbeat extends', async () => {
    await using d = await startRunDaemon();
    await startRun(d, await pushBundle(d));
    const l = await lease(d, ['model'], { ttl_seconds: 2 });
    expect(l.body.ttl_seconds).toBe(2);
    expect(l.body.heartbeat_seconds).toBe(1);
    const exp0 = Date.parse(l.body.expires_at);
    expect(exp0 - Date.now()).toBeGreaterThan(1000);
    await sleep(1200);
    const hb = await d.kernel_(`/leases/${l.body.lease_id}/heartbeat`, { method: 'POST' });
    expect(hb.status).toBe(200);
    expect(Object.keys(hb.body)).toEqual(['expires_at']);
    expect(Date.parse(hb.body.expires_at)).toBeGreaterThan(exp0);
    await sleep(1200); // past the first expiry, inside the extended one
    expect((await d.kernel_(`/leases/${l.body.lease_id}/complete`, { body: { output: { amount: 1 } } })).status).toBe(200);
  });

  it('an expired lease is 410 lease_expired and the step is handed out again with attempt + 1', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const first = await lease(d, ['model'], { ttl_seconds: 1 });
    expect(first.body.attempt).toBe(1);
    await sleep(1100);
    for (const path of ['heartbeat', 'complete', 'fail', 'actions']) {
      const body = path === 'complete' ? { output: { amount: 1 } } : path === 'fail' ? { error: { code: 'x', message: 'y' } } : path === 'actions' ? { action: { tool: 'billing.lookup' } } : undefined;
      const r = await d.kernel_(`/leases/${first.body.lease_id}/${path}`, { method: 'POST', body });
      expect(r.status, path).toBe(410);
      expect(r.body.error.code).toBe('lease_expired');
    }
    const again = await lease(d, ['model']);
    expect(again.body).toMatchObject({ run_id, step: 'triage', attempt: 2 });
    expect(again.body.lease_id).not.toBe(first.body.lease_id);
    const events = await allEvents(d, run_id);
    const expired = events.find((e) => e.kind === 'lease.expired');
    // svc-events(7): a ttl expiry says so (`undelivered` is the other reason).
    expect(expired.payload).toEqual({ lease_id: first.body.lease_id, step: 'triage', kind: 'model', attempt: 1, next_attempt: 2, reason: 'ttl' });
    expect(again.body.context.prior_events.map((e: any) => e.kind)).toEqual(['step.leased', 'lease.expired']);
    const metrics = (await d.kernel_('/metrics')).body as string;
    expect(metrics).toMatch(/^svc_leases_expired_total 1$/m);
  });

  it('the sweeper expires leases nobody touches', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    await lease(d, ['model'], { ttl_seconds: 1 });
    expect((await getRun(d, run_id)).steps.triage).toMatchObject({ state: 'leased', attempt: 1 });
    await sleep(1800);
    expect((await getRun(d, run_id)).steps.triage).toMatchObject({ state: 'pending', attempt: 2 });
  });

  it('a lease expiring on the last attempt quarantines the step', async () => {
    await using d = await startRunDaemon();
    const b = refundsBundle();
    b.workflows.refund!.steps[0]!.retry = { max_attempts: 1 };
    const { run_id } = await startRun(d, await pushBundle(d, b));
    await lease(d, ['model'], { ttl_seconds: 1 });
    await sleep(1100);
    expect((await lease(d)).status).toBe(204);
    const run = await getRun(d, run_id);
    expect(run).toMatchObject({ state: 'parked', parked_reason: 'quarantine' });
    expect(run.steps.triage).toMatchObject({ state: 'quarantined', error: { code: 'lease_expired' } });
    // svc-events(7): run.parked names the lease whose expiry parked the run.
    const l = (await allEvents(d, run_id)).find((e) => e.kind === 'step.leased')!;
    expect((await allEvents(d, run_id)).at(-1)).toMatchObject({ kind: 'run.parked', payload: { reason: 'quarantine', lease_id: l.payload.lease_id, approval_id: null } });
  });

  it('a compensation lease expiring on its last attempt: compensation.failed names that lease', async () => {
    await using d = await startRunDaemon();
    const b = refundsBundle();
    b.tools!['billing.unlookup'] = { writes: true };
    b.workflows.refund!.steps[1]!.compensate = { tool: 'billing.unlookup', args: {} };
    b.workflows.refund!.steps[1]!.retry = { max_attempts: 1 };
    const { run_id } = await startRun(d, await pushBundle(d, b), { autonomy: 'autonomous' });
    await leaseAndComplete(d, { amount: 20 });
    await leaseAndComplete(d, { rows: 2 });
    await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'wrong customer' } });
    const comp = await lease(d, ['compensation'], { ttl_seconds: 1 });
    expect(comp.body.step).toBe('lookup');
    await sleep(1100);
    expect((await lease(d, ['compensation'])).status).toBe(204);
    const failed = (await allEvents(d, run_id)).find((e) => e.kind === 'compensation.failed')!;
    expect(failed.payload).toMatchObject({ step: 'lookup', attempt: 1, lease_id: comp.body.lease_id, error: { code: 'lease_expired' } });
    expect((await getRun(d, run_id)).state).toBe('abandoned');
  });

  it('a completed or failed lease is 410; an unknown lease is 404', async () => {
    await using d = await startRunDaemon();
    await startRun(d, await pushBundle(d));
    const { lease: l } = await leaseAndComplete(d, { amount: 3 });
    const r = await d.kernel_(`/leases/${l.lease_id}/heartbeat`, { method: 'POST' });
    expect(r.status).toBe(410);
    expect(r.body.error.details.status).toBe('completed');
    const nf = await d.kernel_('/leases/lse_nope/heartbeat', { method: 'POST' });
    expect(nf.status).toBe(404);
    expect(nf.body.error).toMatchObject({ code: 'not_found', details: { resource: 'lease', id: 'lse_nope' } });
  });
});

describe('complete (I 4.1, D §6)', () => {
  it('checks output against output_schema: 422 output_invalid, the lease stays usable', async () => {
    await using d = await startRunDaemon();
    await startRun(d, await pushBundle(d));
    const l = await lease(d, ['model']);
    const bad = await d.kernel_(`/leases/${l.body.lease_id}/complete`, { body: { output: { amount: 'lots' } } });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe('output_invalid');
    expect(bad.body.error.details.errors[0].path).toBe('/amount');
    expect(bad.body.error.details).toMatchObject({ step: 'triage', path: '/amount' });
    const good = await d.kernel_(`/leases/${l.body.lease_id}/complete`, { body: { output: { amount: 3 } } });
    expect(good.body).toEqual({ run_state: 'running', next_step: 'lookup' });
  });

  it('refuses malformed bodies with 400, never 500', async () => {
    await using d = await startRunDaemon();
    await startRun(d, await pushBundle(d));
    const l = await lease(d, ['model']);
    for (const body of [{ output: 1, usage: { tokens: -1 } }, { output: 1, usage: { tokens: 1.5 } }, { output: 1, usage: { usd: 'x' } }, '[1]']) {
      const r = await d.kernel_(`/leases/${l.body.lease_id}/complete`, { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
    for (const body of [{}, { error: { message: 'no code' } }, { error: { code: 'x' }, deterministic: 'yes' }]) {
      const r = await d.kernel_(`/leases/${l.body.lease_id}/fail`, { body });
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
  });

  it('a failure report sent to complete is 400 naming /error, and the step is not completed', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const l = await lease(d, ['model']);
    const r = await d.kernel_(`/leases/${l.body.lease_id}/complete`, { body: { error: { code: 'boom', message: 'it broke' } } });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ code: 'request_invalid', details: { path: '/error' } });
    expect(r.body.error.message).toContain('/fail');
    expect((await getRun(d, run_id)).steps.triage.state).toBe('leased');
    // The same lease still fails properly.
    expect((await d.kernel_(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'boom' }, deterministic: true } })).body.outcome).toBe('quarantined');
    // Once the lease has ended, such a body is 410 like any other (the lease is checked first).
    const late = await d.kernel_(`/leases/${l.body.lease_id}/complete`, { body: { error: { code: 'boom' } } });
    expect(late.status).toBe(410);
    expect(late.body.error.code).toBe('lease_expired');
  });
});

describe('fail: retries with backoff, quarantine, resume (I 3, D §6)', () => {
  it('retries with exponential backoff and ±20 % jitter, then quarantines after max_attempts; resume gives fresh attempts', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d)); // triage: max 3, initial 200 ms, max 1000 ms
    const l1 = await lease(d, ['model']);
    const f1 = await d.kernel_(`/leases/${l1.body.lease_id}/fail`, { body: { error: { code: 'upstream_error', message: 'flaky' }, deterministic: false } });
    expect(f1.body.outcome).toBe('retry_scheduled');
    expect(f1.body.delay_ms).toBeGreaterThanOrEqual(160);
    expect(f1.body.delay_ms).toBeLessThanOrEqual(240);
    expect((await getRun(d, run_id)).steps.triage).toMatchObject({ state: 'retry_wait', attempt: 2, error: { code: 'upstream_error', message: 'flaky' } });
    expect((await lease(d, ['model'])).status).toBe(204); // not ready yet

    const t = Date.now();
    const l2 = await lease(d, ['model'], { wait_seconds: 5 });
    expect(l2.body.attempt).toBe(2);
    expect(Date.now() - t).toBeLessThan(1000);
    const f2 = await d.kernel_(`/leases/${l2.body.lease_id}/fail`, { body: { error: { code: 'upstream_error', message: 'again' } } });
    expect(f2.body.outcome).toBe('retry_scheduled');
    expect(f2.body.delay_ms).toBeGreaterThanOrEqual(320);
    expect(f2.body.delay_ms).toBeLessThanOrEqual(480);

    const l3 = await lease(d, ['model'], { wait_seconds: 5 });
    expect(l3.body.attempt).toBe(3);
    const f3 = await d.kernel_(`/leases/${l3.body.lease_id}/fail`, { body: { error: { code: 'upstream_error', message: 'still' } } });
    expect(f3.body).toMatchObject({ outcome: 'quarantined', delay_ms: null, run_state: 'parked' });
    const parked = await getRun(d, run_id);
    expect(parked).toMatchObject({ state: 'parked', parked_reason: 'quarantine' });
    expect(parked.steps.triage).toMatchObject({ state: 'quarantined', attempt: 3 });
    expect((await d.kernel_('/health')).body.runs).toEqual({ running: 0, parked: 1 });

    const resumed = await d.kernel_(`/runs/${run_id}/resume`, { body: { actor: { id: 'ops-1', role: 'ops' } } });
    expect(resumed.status).toBe(200);
    expect(resumed.body).toEqual({ run_id, state: 'running' });
    const l4 = await lease(d, ['model']);
    expect(l4.body.attempt).toBe(1);
    expect((await d.kernel_(`/leases/${l4.body.lease_id}/complete`, { body: { output: { amount: 1 } } })).body.next_step).toBe('lookup');
    const kinds = (await allEvents(d, run_id)).map((e) => e.kind);
    expect(kinds.filter((k) => k === 'step.retry_scheduled')).toHaveLength(2);
    expect(kinds).toContain('step.quarantined');
    expect(kinds).toContain('run.resumed');
  });

  it('a deterministic failure quarantines at once and parks the run; resume of a running run is 409 invalid_state', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    expect((await d.kernel_(`/runs/${run_id}/resume`, { body: {} })).body.error.code).toBe('invalid_state');
    const l = await lease(d, ['model']);
    const f = await d.kernel_(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'schema', message: 'bad output' }, deterministic: true } });
    expect(f.body).toMatchObject({ outcome: 'quarantined', delay_ms: null });
    expect(await getRun(d, run_id)).toMatchObject({ state: 'parked', parked_reason: 'quarantine', steps: { triage: { state: 'quarantined', attempt: 1 } } });
    const events = await allEvents(d, run_id);
    expect(events.slice(-3).map((e) => [e.kind, e.payload.reason ?? null])).toEqual([
      ['step.failed', null],
      ['step.quarantined', 'deterministic'],
      ['run.parked', 'quarantine'],
    ]);
    // svc-events(7): run.parked {reason, step, approval_id, lease_id}, every member present.
    expect(events.at(-1)!.payload).toEqual({ reason: 'quarantine', step: 'triage', approval_id: null, lease_id: l.body.lease_id });
    expect((await lease(d, ['model'])).status).toBe(204);
  });

  it('connector_quarantined parks the run without spending an attempt', async () => {
    await using d = await startRunDaemon();
    const { run_id } = await startRun(d, await pushBundle(d));
    const l = await lease(d, ['model']);
    const f = await d.kernel_(`/leases/${l.body.lease_id}/fail`, { body: { error: { code: 'connector_quarantined', message: 'billing is quarantined' } } });
    expect(f.body).toMatchObject({ outcome: 'quarantined', delay_ms: null, run_state: 'parked' });
    expect(await getRun(d, run_id)).toMatchObject({ state: 'parked', parked_reason: 'connector_quarantined', steps: { triage: { state: 'pending', attempt: 1 } } });
    const parked = (await allEvents(d, run_id)).at(-1)!;
    expect(parked).toMatchObject({ kind: 'run.parked', payload: { reason: 'connector_quarantined', step: 'triage', approval_id: null, lease_id: l.body.lease_id } });
    await d.kernel_(`/runs/${run_id}/resume`, { body: {} });
    // svc-events(7): run.resumed {reason, step, via, approval_id}, approval_id null for a resume.
    expect((await allEvents(d, run_id)).at(-1)!.payload).toEqual({ reason: 'connector_quarantined', step: 'triage', via: 'resume', approval_id: null });
    expect((await lease(d, ['model'])).body.attempt).toBe(1);
  });

  it('{{path | text}} reaches the lease as plain text; validation and push accept it (svc-bundle(5) TEMPLATES)', async () => {
    await using d = await startRunDaemon();
    const b = refundsBundle();
    b.workflows.refund!.steps[1]!.args = { invoice_id: '{{input.invoice_id}}', path: 'invoices/{{input.invoice_id | text}}/{{steps.triage.output.amount|text}}.json' };
    await startRun(d, await pushBundle(d, b));
    await leaseAndComplete(d, { amount: 12.5 });
    const l = await lease(d, ['tool']);
    expect(l.status).toBe(200);
    expect(l.body.step_def.args).toEqual({ invoice_id: 'inv-1', path: 'invoices/inv-1/12.5.json' });
  });

  it('a template that does not render is a deterministic failure at lease time (D §4)', async () => {
    await using d = await startRunDaemon();
    const b = refundsBundle();
    b.workflows.refund!.steps[1]!.args = { invoice_id: '{{steps.triage.output.invoice}}' };
    const { run_id } = await startRun(d, await pushBundle(d, b));
    await leaseAndComplete(d, { amount: 1 });
    expect((await lease(d, ['tool'])).status).toBe(204);
    const run = await getRun(d, run_id);
    expect(run).toMatchObject({ state: 'parked', parked_reason: 'quarantine' });
    expect(run.steps.lookup).toMatchObject({ state: 'quarantined', error: { code: 'template_invalid' } });
    expect((await allEvents(d, run_id)).at(-1)!.payload).toEqual({ reason: 'quarantine', step: 'lookup', approval_id: null, lease_id: null });
  });
});
