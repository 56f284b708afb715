/**
 * The kernel on PostgreSQL inside the normal test run (decisions §11; docs/design.md
 * "PostgreSQL store"): a representative run of each part — runs to completion with spend,
 * leases, approvals, abandon with compensation, replay, remits derive — on one svcd, then two
 * svcd instances sharing one database. Skipped, with the reason printed, without a server;
 * `npm run test:pg` runs the whole integration suite on PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeBase64url } from '../../src/encoding/base64url.js';
import { generateKeyPair } from '../../src/keys/ed25519.js';
import { createPgSchema, PG_URL, pgSkip, type PgSchema } from '../helpers/pg.js';
import { allEvents, APPROVER, getRun, lease, leaseAndComplete, propose, pushBundle, refundsBundle, runToAction, sleep, startRun, startRunDaemon, type RunDaemon, fourWorkersOverEightRuns } from './run-fixtures.js';

const skip = await pgSkip('pg-kernel.test');
const BIG = { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 500 } };

describe.skipIf(skip)('svcd on PostgreSQL (D §11)', () => {
  let schema: PgSchema;
  let d: RunDaemon;
  beforeAll(async () => {
    schema = await createPgSchema();
    d = await startRunDaemon({ store: PG_URL, storeSchema: schema.schema });
  });
  afterAll(async () => {
    await d?.close();
    await schema?.drop();
  });

  it('a run goes to completed with its usage, a valid replay and a store that is PostgreSQL', async () => {
    expect(d.kernel!.db.dialect).toBe('postgres');
    const { run_id } = await startRun(d, await pushBundle(d), { autonomy: 'autonomous' });
    await leaseAndComplete(d, { amount: 20 }, { tokens: 10, usd: 0.01 }, ['model']);
    await leaseAndComplete(d, { rows: [] }, { tokens: 0, usd: 0 }, ['tool']);
    await leaseAndComplete(d, { id: 'rf-1' }, { tokens: 0, usd: 0 }, ['action']);
    expect(await getRun(d, run_id)).toMatchObject({ state: 'completed', usage: { tokens: 10, usd: 0.01 } });
    const replay = await d.kernel_(`/runs/${run_id}/replay`, { method: 'POST' });
    expect(replay.body).toMatchObject({ chain_valid: true, state_matches: true });
    // Lists sort ids byte by byte (COLLATE "C"), newest first, as on SQLite.
    const listed = await d.kernel_('/runs?limit=10');
    expect(listed.body.runs.map((r: { run_id: string }) => r.run_id)).toContain(run_id);
  });

  it('an approval parks the run; approving lets the action through (D 5.4)', async () => {
    const { run_id, lease: l } = await runToAction(d);
    const p = (await propose(d, l.lease_id, BIG)).body;
    expect(p.approval_id).toBeTruthy();
    expect(await getRun(d, run_id)).toMatchObject({ state: 'parked', pending_approval_id: p.approval_id });
    const pending = await d.kernel_(`/approvals?approver=role:finance&state=pending`);
    expect(pending.body.approvals.map((a: { approval_id: string }) => a.approval_id)).toContain(p.approval_id);
    const r = await d.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'approved', actor: APPROVER, reason: 'ok' } });
    expect(r.status).toBe(200);
    expect(await getRun(d, run_id)).toMatchObject({ state: 'running', pending_approval_id: null });
  });

  it('abandon compensates completed steps in a compensation lease, then the run is abandoned (D §6)', async () => {
    const bundle = refundsBundle({ version: '2.0.0' });
    bundle.tools!['billing.unlookup'] = { writes: true };
    bundle.workflows.refund!.steps[1]!.compensate = { tool: 'billing.unlookup', args: { invoice_id: '{{input.invoice_id}}' } };
    const { run_id } = await startRun(d, await pushBundle(d, bundle), { autonomy: 'autonomous' });
    await leaseAndComplete(d, { amount: 20 }, undefined, ['model']);
    await leaseAndComplete(d, { rows: 2 }, undefined, ['tool']);
    expect((await lease(d, ['action'])).status).toBe(200); // in flight when abandoned
    const ab = await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'withdrawn', actor: { id: 'ops-1', role: 'ops' } } });
    expect(ab.status).toBe(202);
    expect(ab.body.compensations_scheduled).toBe(1);
    expect(await getRun(d, run_id)).toMatchObject({ state: 'abandoning', current_step: 'lookup' });
    const c = await lease(d, ['compensation']);
    expect(c.body).toMatchObject({ run_id, step: 'lookup', kind: 'compensation' });
    const done = await d.kernel_(`/leases/${c.body.lease_id}/complete`, { body: { output: { undone: true } } });
    expect(done.body).toEqual({ run_state: 'abandoned', next_step: null });
  });

  it('derive reserves spend from the parent; big micro-dollar amounts survive BIGINT (D §3, 8.3)', async () => {
    const parent = (await d.kernel_('/remits', { body: { tools: ['billing.*'], scopes: [], grants: [], spend: { tokens: 10_000_000, usd: 50_000 }, autonomy: 'supervised', ttl_seconds: 600, policy_set: [], requested_by: { id: 'ana', role: 'agent', manager: 'finance' } } })).body;
    const child = await d.kernel_(`/remits/${parent.remit_id}/derive`, { body: { spend: { tokens: 1000, usd: 30_000 } } });
    expect(child.status).toBe(201);
    const over = await d.kernel_(`/remits/${parent.remit_id}/derive`, { body: { spend: { tokens: 1000, usd: 30_000 } } });
    expect(over.status).toBe(422);
  });
});

describe.skipIf(skip)('concurrent workers on one svcd on PostgreSQL (D §6)', () => {
  // Four workers racing for eight runs: under SERIALIZABLE, one svcd's transactions failed
  // each other past every retry until they ran one at a time (pg-db.ts tx).
  it('never hands one step to two workers; every run completes with a valid chain', async () => {
    const schema = await createPgSchema();
    try {
      await using d = await startRunDaemon({ store: PG_URL, storeSchema: schema.schema });
      await fourWorkersOverEightRuns(d);
    } finally {
      await schema.drop();
    }
  });
});

describe.skipIf(skip)('two svcd on one PostgreSQL database (D §11)', () => {
  let schema: PgSchema;
  let a: RunDaemon;
  let b: RunDaemon;
  beforeAll(async () => {
    schema = await createPgSchema();
    // One signing key for both: each verifies the remit tokens and run heads the other signed.
    const signingKey = encodeBase64url(generateKeyPair().seed);
    a = await startRunDaemon({ store: PG_URL, storeSchema: schema.schema, signingKey, sweepIntervalMs: 100 });
    b = await startRunDaemon({ store: PG_URL, storeSchema: schema.schema, signingKey, sweepIntervalMs: 100, publishers: [`${a.publisher.key_id}:${a.publisher.public_key}`] });
    b.publisher = a.publisher;
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await schema?.drop();
  });

  // First: runToAction leases whatever model and tool work is ready, which must be its own.
  it('approve on one instance, abandon on the other, no double decision', async () => {
    const { run_id, lease: l } = await runToAction(a);
    const p = (await propose(a, l.lease_id, BIG)).body;
    const [ra, rb] = await Promise.all([
      a.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'approved', actor: APPROVER } }),
      b.kernel_(`/approvals/${p.approval_id}`, { body: { decision: 'rejected', actor: APPROVER } }),
    ]);
    // Both instances answer; exactly one decision is recorded.
    expect([ra.status, rb.status].filter((s) => s === 200)).toHaveLength(1);
    const decided = (await allEvents(b, run_id)).filter((e) => e.kind === 'approval.decided');
    expect(decided).toHaveLength(1);
    const ab = await b.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'stop', actor: { id: 'ops-1', role: 'ops' } } });
    expect(ab.status).toBe(202);
    expect((await getRun(a, run_id)).state).toMatch(/^abandon/);
    const replay = await a.kernel_(`/runs/${run_id}/replay`, { method: 'POST' });
    expect(replay.body).toMatchObject({ chain_valid: true, state_matches: true });
  });
  it('a run created on one is leased by a worker long-polling the other, within about a second', async () => {
    const bundleId = await pushBundle(a);
    const waiting = lease(b, ['model'], { wait_seconds: 10 });
    await sleep(200); // the request is waiting on b
    const started = performance.now();
    const { run_id } = await startRun(a, bundleId, { autonomy: 'autonomous' });
    const got = await waiting;
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ run_id, step: 'triage' });
    expect(performance.now() - started).toBeLessThan(2500); // SHARED_STORE_LOOK_MS: 1 s
    const done = await a.kernel_(`/leases/${got.body.lease_id}/complete`, { body: { output: { amount: 20 }, usage: { tokens: 1, usd: 0 } } });
    expect(done.status).toBe(200);
  });

  it('an expired lease is swept once though both instances sweep', async () => {
    const { run_id } = await startRun(a, await pushBundle(a), { autonomy: 'autonomous' });
    const l = await lease(b, ['model'], { ttl_seconds: 1 });
    expect(l.body.run_id).toBe(run_id);
    await sleep(2000);
    const expired = (await allEvents(a, run_id)).filter((e) => e.kind === 'lease.expired');
    expect(expired).toHaveLength(1);
    const again = await lease(a, ['model']);
    expect(again.body).toMatchObject({ run_id, attempt: 2 });
  });
});
