/**
 * Runs under random sequences of operations (decisions §6–§8, interface 3 and 4.1): fast-check
 * draws programs of run starts, leases of any kinds, completions (valid output or not, usage
 * that may cross a small budget), failures (deterministic or not), heartbeats, proposals that
 * are allowed, denied or sent to a human, decisions, resumes, abandons, replays, sub-runs and
 * steps of the kernel's clock (retry delays passing, leases expiring), some of them two or three
 * at once, and runs them against a fresh svcd. No operation may answer 500, and after every program:
 * - every run replays with a valid chain, a matching state and no decision mismatch (I 4.1
 *   replay, D §7);
 * - `svc_runs{state}` counts what `GET /runs` lists, and `svc_approvals_pending` what
 *   `GET /approvals?state=pending` lists (I 4.1 kernel metrics);
 * - a pending approval belongs to a run that has not ended, and a run's
 *   `pending_approval_id` names a pending approval of that run (D §6, interface 3);
 * - a terminal run has no step still `leased` (D §6);
 * - a run's usage is the sum of what its accepted completions and failures reported, and a run
 *   whose usage exceeds its budget has failed or is abandoning or abandoned (D §8), and the
 *   remits derived from one remit never reserve more than its spend (D 8.3), sub-runs included.
 * Failures shrink to the shortest program that breaks one of these. The kernel's background
 * sweeper is off (sweepIntervalMs 0): leases expire only when a lease request or an access finds
 * them, at points the program chooses, so a seed replays the same way but for the operations it
 * sends at once. test/integration/leases.test.ts covers the sweeper itself.
 *
 * SVC_FUZZ_RUNS raises the number of programs (default 30).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { metricValue } from '../gateway/helpers.js';
import { APPROVER, pushBundle, pushPolicy, REFUNDS_POLICY, refundsBundle, REQUESTER, startRun, startRunDaemon, type RunDaemon } from './run-fixtures.js';

const PROGRAMS = Number(process.env.SVC_FUZZ_RUNS ?? 30);
const KINDS = ['model', 'tool', 'action', 'compensation'] as const;
const TERMINAL = new Set(['completed', 'failed', 'abandoned']);

/** The refunds bundle with a compensation on the lookup too, so an abandon mid-run has one to schedule. */
const BUNDLE = refundsBundle();
BUNDLE.workflows.refund!.steps[1] = { ...BUNDLE.workflows.refund!.steps[1]!, compensate: { tool: 'billing.void_refund', args: { refund_id: 'none' } } };

type Op =
  | { op: 'start'; budget: 'ample' | 'tight' }
  | { op: 'lease'; kinds: string[] }
  | { op: 'advance' }
  | { op: 'ask'; fromNewest: number }
  | { op: 'complete'; fromNewest: number; valid: boolean; tokens: number }
  | { op: 'fail'; fromNewest: number; deterministic: boolean; tokens: number }
  | { op: 'heartbeat'; fromNewest: number }
  | { op: 'propose'; fromNewest: number; what: 'small' | 'large' | 'export' }
  | { op: 'decide'; fromNewest: number; decision: 'approved' | 'rejected' }
  | { op: 'resume'; fromNewest: number }
  | { op: 'abandon'; fromNewest: number }
  | { op: 'replay'; fromNewest: number }
  | { op: 'derive'; fromNewest: number; tokens: number }
  | { op: 'tick'; seconds: number }
  | { op: 'together'; ops: Op[] };

/** Which lease, run or approval an operation acts on, counted from the newest: mostly the newest. */
const fromNewest = fc.oneof({ arbitrary: fc.constant(0), weight: 3 }, { arbitrary: fc.nat({ max: 50 }), weight: 2 });
const one: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('start' as const), budget: fc.constantFrom('ample' as const, 'tight' as const) }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('lease' as const), kinds: fc.subarray([...KINDS], { minLength: 1 }) }), weight: 3 },
  { arbitrary: fc.constant({ op: 'advance' as const }), weight: 5 },
  { arbitrary: fc.record({ op: fc.constant('ask' as const), fromNewest }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('complete' as const), fromNewest, valid: fc.oneof({ arbitrary: fc.constant(true), weight: 3 }, { arbitrary: fc.constant(false), weight: 1 }), tokens: fc.constantFrom(0, 10, 400) }), weight: 4 },
  { arbitrary: fc.record({ op: fc.constant('fail' as const), fromNewest, deterministic: fc.boolean(), tokens: fc.constantFrom(0, 10, 400) }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('heartbeat' as const), fromNewest }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('propose' as const), fromNewest, what: fc.constantFrom('small' as const, 'large' as const, 'export' as const) }), weight: 3 },
  { arbitrary: fc.record({ op: fc.constant('decide' as const), fromNewest, decision: fc.constantFrom('approved' as const, 'rejected' as const) }), weight: 2 },
  { arbitrary: fc.record({ op: fc.constant('resume' as const), fromNewest }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('abandon' as const), fromNewest }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('replay' as const), fromNewest }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('derive' as const), fromNewest, tokens: fc.constantFrom(50, 300, 60_000) }), weight: 1 },
  // The kernel's clock: 2 s lets retry delays pass, 601 s expires every lease (ttl 600).
  { arbitrary: fc.record({ op: fc.constant('tick' as const), seconds: fc.constantFrom(2, 601) }), weight: 1 },
);
/** An operation, or two or three sent at once (the kernel serializes what must be serial). */
const ops: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: one, weight: 6 },
  { arbitrary: fc.record({ op: fc.constant('together' as const), ops: fc.array(one, { minLength: 2, maxLength: 3 }) }), weight: 1 },
);

/** A kernel request that must never answer 500 (D §10). */
async function call(d: RunDaemon, path: string, body?: unknown, method = body === undefined ? 'GET' : 'POST'): Promise<{ status: number; body: any }> {
  const r = await d.kernel_(path, body === undefined ? { method } : { method, body });
  expect(r.status, `${path} ${JSON.stringify(body)} → ${JSON.stringify(r.body)}`).toBeLessThan(500);
  return r;
}

/** What a step of each kind returns when it does its job (the refunds bundle's schemas). */
function outputFor(kind: string, step: string): unknown {
  if (kind === 'model') return { amount: 150 };
  if (kind === 'tool') return { rows: [] };
  return { id: `rf-${step}` };
}

const pick = <T>(list: T[], i: number): T | undefined => (list.length === 0 ? undefined : list[list.length - 1 - (i % list.length)]);

async function allPages<T>(d: RunDaemon, path: string, member: string): Promise<T[]> {
  const out: T[] = [];
  let after: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page = await call(d, `${path}${sep}limit=500${after ? `&after=${encodeURIComponent(after)}` : ''}`);
    out.push(...(page.body[member] as T[]));
    after = page.body.next;
  } while (after);
  return out;
}

async function checkInvariants(d: RunDaemon, runIds: string[], children: Map<string, Array<{ tokens: number; usd: number }>>, reported: Map<string, number>): Promise<void> {
  for (const [parent, kids] of children) {
    const spend = (await call(d, `/remits/${parent}`)).body.spend;
    expect(kids.reduce((t, k) => t + k.tokens, 0), `tokens reserved from ${parent}`).toBeLessThanOrEqual(spend.tokens);
    expect(kids.reduce((t, k) => t + Math.round(k.usd * 1e6), 0), `usd reserved from ${parent}`).toBeLessThanOrEqual(Math.round(spend.usd * 1e6));
  }
  const runs = await allPages<{ run_id: string; state: string }>(d, '/runs', 'runs');
  expect(runs.map((r) => r.run_id).sort()).toEqual([...runIds].sort());
  const metrics = (await d.kernel_('/metrics')).body as string;
  for (const state of ['running', 'parked', 'completed', 'failed', 'abandoning', 'abandoned']) {
    expect(metricValue(metrics, 'svc_runs', { state }), `svc_runs{state="${state}"}`).toBe(runs.filter((r) => r.state === state).length);
  }
  const pending = await allPages<{ approval_id: string; run_id: string }>(d, '/approvals?state=pending', 'approvals');
  expect(metricValue(metrics, 'svc_approvals_pending')).toBe(pending.length);
  for (const runId of runIds) {
    const run = (await call(d, `/runs/${runId}`)).body;
    const replay = (await call(d, `/runs/${runId}/replay`, undefined, 'POST')).body;
    expect(replay, `replay of ${runId}`).toMatchObject({ chain_valid: true, state_matches: true, chain_errors: [], decision_mismatches: [] });
    const mine = pending.filter((a) => a.run_id === runId);
    if (TERMINAL.has(run.state)) {
      expect(mine, `${runId} is ${run.state} with a pending approval`).toEqual([]);
      const leased = Object.entries(run.steps as Record<string, { state: string }>).filter(([, s]) => s.state === 'leased');
      expect(leased, `${runId} is ${run.state} with a leased step`).toEqual([]);
    }
    expect(run.usage.tokens, `${runId} usage`).toBe(reported.get(runId) ?? 0);
    if (run.usage.tokens > run.budget.tokens || run.usage.usd > run.budget.usd) expect(['failed', 'abandoning', 'abandoned'], `${runId} over budget`).toContain(run.state);
    if (run.pending_approval_id) expect(mine.map((a) => a.approval_id), `${runId} pending_approval_id`).toContain(run.pending_approval_id);
  }
}

async function runProgram(program: Op[]): Promise<void> {
  const clock = new ManualClock(Date.now());
  await using d = await startRunDaemon({ clock, sweepIntervalMs: 0 });
  const bundleId = await pushBundle(d, BUNDLE);
  await pushPolicy(d, 'refunds', '1', REFUNDS_POLICY);
  const runIds: string[] = [];
  const leases: Array<{ lease_id: string; run_id: string; step: string; kind: string }> = [];
  const approvals: string[] = [];
  const children = new Map<string, Array<{ tokens: number; usd: number }>>();
  /** Tokens each run's accepted completions and failures reported (D §8: usage is added). */
  const reported = new Map<string, number>();
  const charge = (l: (typeof leases)[number], r: { status: number }, tokens: number) => {
    if (r.status === 200) reported.set(l.run_id, (reported.get(l.run_id) ?? 0) + tokens);
  };
  /** Leases are kept while held: one that ended (completed, failed, parked, expired, released) is dropped. */
  const settle = (l: (typeof leases)[number], r: { status: number; body: any }) => {
    const ended = r.status === 410 || (r.status === 200 && ('run_state' in r.body || 'outcome' in r.body || r.body.decision === 'approval_required'));
    if (ended && leases.includes(l)) leases.splice(leases.indexOf(l), 1);
  };
  const exec = async (o: Op): Promise<void> => {
    switch (o.op) {
      case 'together':
        await Promise.all(o.ops.map(exec));
        break;
      case 'start': {
        const spend = o.budget === 'ample' ? { tokens: 100_000, usd: 5 } : { tokens: 500, usd: 5 };
        runIds.push((await startRun(d, bundleId, { spend, policy_set: ['refunds'], input: { invoice_id: 'inv-1', ticket: 't' } })).run_id);
        break;
      }
      case 'lease': {
        const l = await call(d, '/leases', { worker_id: 'prop', kinds: o.kinds, ttl_seconds: 600 });
        if (l.status === 200) leases.push({ lease_id: l.body.lease_id, run_id: l.body.run_id, step: l.body.step, kind: l.body.step_def.kind });
        break;
      }
      case 'advance': {
        // Work done as a worker would do it: the newest lease still held, else the next ready
        // step of any kind; a refund proposed small, then the step completed.
        let l = leases.at(-1);
        if (!l) {
          const got = await call(d, '/leases', { worker_id: 'prop', kinds: [...KINDS], ttl_seconds: 600 });
          if (got.status !== 200) break;
          l = { lease_id: got.body.lease_id, run_id: got.body.run_id, step: got.body.step, kind: got.body.step_def.kind };
          leases.push(l);
        }
        if (l.kind === 'action') await call(d, `/leases/${l.lease_id}/actions`, { action: { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 50 } } });
        const done = await call(d, `/leases/${l.lease_id}/complete`, { output: outputFor(l.kind, l.step), usage: { tokens: 10, usd: 0 } });
        charge(l, done, 10);
        settle(l, done);
        break;
      }
      case 'ask': {
        // An action lease whose refund needs finance: the run parks for a human.
        const l = await call(d, '/leases', { worker_id: 'prop', kinds: ['action'], ttl_seconds: 600 });
        if (l.status !== 200) break;
        const held = { lease_id: l.body.lease_id, run_id: l.body.run_id, step: l.body.step, kind: 'action' };
        leases.push(held);
        const r = await call(d, `/leases/${l.body.lease_id}/actions`, { action: { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 500 } } });
        settle(held, r);
        if (r.body.decision === 'approval_required') approvals.push(r.body.approval_id);
        break;
      }
      case 'complete': {
        const l = pick(leases, o.fromNewest);
        if (!l) break;
        const output = o.valid ? outputFor(l.kind, l.step) : { amount: 'lots' };
        const done = await call(d, `/leases/${l.lease_id}/complete`, { output, usage: { tokens: o.tokens, usd: 0 } });
        charge(l, done, o.tokens);
        settle(l, done);
        break;
      }
      case 'fail': {
        const l = pick(leases, o.fromNewest);
        if (!l) break;
        const failed = await call(d, `/leases/${l.lease_id}/fail`, { error: { code: 'prop', message: 'drawn' }, deterministic: o.deterministic, usage: { tokens: o.tokens, usd: 0 } });
        charge(l, failed, o.tokens);
        settle(l, failed);
        break;
      }
      case 'heartbeat': {
        const l = pick(leases, o.fromNewest);
        if (l) settle(l, await call(d, `/leases/${l.lease_id}/heartbeat`, undefined, 'POST'));
        break;
      }
      case 'propose': {
        const l = pick(leases, o.fromNewest);
        if (!l) break;
        const action = o.what === 'export' ? { tool: 'billing.export', args: {} } : { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: o.what === 'large' ? 500 : 50 } };
        const r = await call(d, `/leases/${l.lease_id}/actions`, { action });
        settle(l, r);
        if (r.status === 200 && r.body.approval_id && r.body.decision === 'approval_required') approvals.push(r.body.approval_id);
        break;
      }
      case 'decide': {
        const a = pick(approvals, o.fromNewest);
        if (a) await call(d, `/approvals/${a}`, { decision: o.decision, actor: APPROVER, reason: 'drawn' });
        break;
      }
      case 'derive': {
        // A sub-run (I 4.1 rule 5): a remit derived from a run's remit, and a run on it.
        const runId = pick(runIds, o.fromNewest);
        if (!runId) break;
        const parent = (await call(d, `/runs/${runId}`)).body.remit_id as string;
        const spend = { tokens: o.tokens, usd: 0.5 };
        const child = await call(d, `/remits/${parent}/derive`, { spend });
        if (child.status !== 201) break;
        children.set(parent, [...(children.get(parent) ?? []), spend]);
        const run = await call(d, '/runs', { bundle_id: bundleId, workflow: 'refund', input: { invoice_id: 'inv-2' }, remit_id: child.body.remit_id, requested_by: REQUESTER });
        expect(run.status).toBe(201);
        runIds.push(run.body.run_id);
        break;
      }
      case 'tick':
        clock.advance(o.seconds * 1000);
        break;
      case 'resume':
      case 'abandon':
      case 'replay': {
        const runId = pick(runIds, o.fromNewest);
        if (!runId) break;
        const body = o.op === 'abandon' ? { reason: 'drawn', actor: APPROVER } : o.op === 'resume' ? { actor: APPROVER } : undefined;
        const r = await call(d, `/runs/${runId}/${o.op}`, body, 'POST');
        if (o.op === 'replay') expect(r.body).toMatchObject({ chain_valid: true, state_matches: true });
        break;
      }
    }
  };
  for (const o of program) await exec(o);
  await checkInvariants(d, runIds, children, reported);
}

describe('runs under random programs keep their invariants (D §6–§8, I 3, I 4.1)', () => {
  it('replay matches, gauges count what the lists show, approvals end with their runs, ended runs hold no lease', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(ops, { minLength: 5, maxLength: 40, size: 'max' }), runProgram),
      { numRuns: PROGRAMS },
    );
  }, 300_000);
});
