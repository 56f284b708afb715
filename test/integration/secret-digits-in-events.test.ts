/**
 * A `${VAR}` value made of digits (a port) and the kernel's own numbers (docs/design.md Events;
 * svc-events(7) DESCRIPTION; decisions §8): svcd runs the gateway in its process, whose config
 * registers every substituted value with the process's redactor, and the redactor turns a
 * number that shows one into the string `[REDACTED]`. Until 2026-11-29 that happened to a
 * step's usage (charged as 0) and a remit's spend (a budget no usage exceeded). Outputs still
 * lose the value, and so does every HTTP answer, whole. The redactor is process-wide: this file
 * registers its value alone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerSecret } from '../../src/gateway/config.js';
import { globalRedactor } from '../../src/log/logger.js';
import { getRun, lease, propose, pushBundle, refundsBundle, runToAction, startRun, startRunDaemon, type RunDaemon } from './run-fixtures.js';

const PORT = '5432';
let d: RunDaemon;
let bundleId: string;
const ONE_STEP = refundsBundle({ name: 'one-step', version: '1.0.0', mock: {}, prompts: {} });
ONE_STEP.workflows.refund!.steps = [{ id: 'lookup', kind: 'tool', tool: 'billing.lookup', args: {} }];

beforeAll(async () => {
  d = await startRunDaemon();
  bundleId = await pushBundle(d, ONE_STEP);
  registerSecret(globalRedactor, PORT); // what the gateway's config does for `${DB_PORT}` = 5432
});
afterAll(async () => {
  await d.close();
});

describe('usage and budgets whose digits show a registered value', () => {
  it('a completion reporting 15432 tokens is charged 15432 tokens; its output still loses the value; replay checks out', async () => {
    const run = await startRun(d, bundleId, { spend: { tokens: 100_000, usd: 5 } });
    const l = await lease(d, ['tool']);
    const done = await d.kernel_(`/leases/${l.body.lease_id}/complete`, { body: { output: { port: 5432, dsn: `db:${PORT}` }, usage: { tokens: 15432, usd: 0 } } });
    expect(done.status).toBe(200);
    // The stored state and log, read in-process: every HTTP answer still passes through the
    // redactor whole (daemon/http/common.ts), where a 15432 is shown as "[REDACTED]".
    const stored = await d.kernel!.runs.get(run.run_id);
    expect(stored).toMatchObject({ state: 'completed', usage: { tokens: 15432 }, output: { port: '[REDACTED]', dsn: 'db:[REDACTED]' } });
    const completed = (await d.kernel!.runs.events(run.run_id)).events.find((e) => e.kind === 'step.completed');
    expect(completed?.payload).toMatchObject({ usage: { tokens: 15432, usd: 0 }, output: { port: '[REDACTED]' } });
    expect((await getRun(d, run.run_id)).usage.tokens).toBe('[REDACTED]');
    const replay = await d.kernel_(`/runs/${run.run_id}/replay`, { method: 'POST' });
    expect(replay.body).toMatchObject({ chain_valid: true, state_matches: true });
  });

  it('a remit spend of 5432 tokens is enforced: 10000 tokens fail the run budget_exhausted', async () => {
    const run = await startRun(d, bundleId, { spend: { tokens: 5432, usd: 5 } });
    const l = await lease(d, ['tool']);
    const done = await d.kernel_(`/leases/${l.body.lease_id}/complete`, { body: { output: {}, usage: { tokens: 10_000, usd: 0 } } });
    expect(done.body.run_state).toBe('failed');
    expect(await d.kernel!.runs.get(run.run_id)).toMatchObject({ state: 'failed', budget: { tokens: 5432 }, error: { code: 'budget_exhausted' } });
  });

  it('a posted model.called usage of 15432 tokens is charged as such when the run is abandoned (D §8)', async () => {
    const run = await startRun(d, bundleId);
    const posted = await d.kernel_(`/runs/${run.run_id}/events`, {
      headers: { 'x-svc-remit': run.token },
      body: { kind: 'model.called', payload: { step: 'lookup', source: 'worker', call_index: 0, segment: 0, usage: { tokens: 15432, usd: 0.5432 } }, actor: { worker_id: 'w-1' } },
    });
    expect(posted.status).toBe(201);
    expect((await d.kernel_(`/runs/${run.run_id}/abandon`, { body: { reason: 'stop', actor: { id: 'ops-1', role: 'ops' } } })).status).toBe(202);
    expect((await d.kernel!.runs.get(run.run_id)).usage).toEqual({ tokens: 15432, usd: 0.5432 });
  });

  it('a posted event is the poster\'s word and is redacted whole, numbers included', async () => {
    const run = await startRun(d, bundleId);
    const posted = await d.kernel_(`/runs/${run.run_id}/events`, {
      headers: { 'x-svc-remit': run.token },
      body: { kind: 'note', payload: { text: `port ${PORT}`, usage: { tokens: 5432 } }, actor: { worker_id: 'w-1' } },
    });
    expect(posted.status).toBe(201);
    const note = (await d.kernel!.runs.events(run.run_id)).events.find((e) => e.kind === 'note');
    expect(note?.payload).toEqual({ text: 'port [REDACTED]', usage: { tokens: '[REDACTED]' } });
  });
});

describe('an approver that shows a registered value (svc-events(7) DESCRIPTION)', () => {
  it('is redacted in the log, and replay compares the approver it derives in the same spelling', async () => {
    await using fresh = await startRunDaemon(); // no ready steps of the runs above
    registerSecret(globalRedactor, 'finance'); // a `${TEAM}` whose value names the approving role
    const { run_id, lease: l } = await runToAction(fresh, { amount: 150 });
    const p = await propose(fresh, l.lease_id, { tool: 'billing.refund', args: { invoice_id: 'inv-1', amount: 150 } });
    expect(p.body).toMatchObject({ decision: 'approval_required', rule: 'refunds/large_refund' });
    const decided = (await fresh.kernel!.runs.events(run_id)).events.find((e) => e.kind === 'action.decided');
    expect(decided?.payload.approver).toBe('role:[REDACTED]');
    const replay = await fresh.kernel_(`/runs/${run_id}/replay`, { method: 'POST' });
    expect(replay.body).toMatchObject({ chain_valid: true, state_matches: true, decision_mismatches: [] });
  });
});
