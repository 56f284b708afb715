// End to end with real processes: the built svcd (kernel + gateway on the demo billing
// database) and the built `svc worker`. Interface 2.6 leases, 3 (approval and abandon rows),
// 4.1, 4.2, 5.5 (the data boundary); decisions 5.4, §6, §9.
import { describe, expect, it } from 'vitest';
import { FakeOpenAi, chatAnswer } from '../worker/fakes.js';
import { FINANCE, REFUNDS_BUNDLE, TICKET, events, ok, publish, spawnWorker, startDemoDaemon, startRun, waitOutput, waitRun } from './helpers.js';

describe('e2e: data boundary (I 5.5) with the OpenAI-compatible provider', () => {
  it('a tool result holding an email under a remit without pii: note events, and the provider never got the address', { timeout: 40_000 }, async () => {
    await using demo = await startDemoDaemon();
    await using openai = await new FakeOpenAi((_body, n) => {
      if (n === 0) return chatAnswer({ toolCalls: [{ id: 'call_1', name: 'billing__lookup_invoice', args: { invoice_id: 'inv_1001' } }] });
      return chatAnswer({ content: JSON.stringify({ category: 'refund', amount: 40, reason: 'duplicate charge' }) });
    }).start();
    await using worker = spawnWorker(demo, ['--provider', 'openai'], { SVC_OPENAI_BASE_URL: `${openai.url}/v1`, SVC_OPENAI_MODEL: 'fake-model', SVC_OPENAI_API_KEY: 'sk-e2e-key-123' });
    const ids = await publish(demo.kernelUrl, REFUNDS_BUNDLE, { grants: [] });
    const runId = await startRun(demo.kernelUrl, ids, TICKET);
    // 40 is within the policy's allow limit (100): the run completes without a human.
    const done = await waitRun(demo.kernelUrl, runId, (s) => s.state === 'completed' || s.state === 'failed' || s.state === 'parked');
    expect(done.state).toBe('completed');
    expect(done.steps.triage.output).toEqual({ category: 'refund', amount: 40, reason: 'duplicate charge' });

    const sent = openai.sentText();
    expect(openai.requests.length).toBe(2);
    expect(sent).not.toContain('dana.whitfield@example.com');
    expect(sent).not.toContain('Dana Whitfield');
    expect(sent).toContain('[REDACTED:pii]');
    expect(sent).toContain('inv_1001');

    const log = await events(demo.kernelUrl, runId);
    const notes = log.filter((e) => e.kind === 'note').map((e) => e.payload);
    expect(notes).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ type: 'redaction', class: 'pii', path: '/steps/lookup/output/rows/0/email', count: 1, step: 'triage' }),
        expect.objectContaining({ type: 'redaction', class: 'pii', path: '/calls/1/result/rows/0/email', count: 1, step: 'triage' }),
        expect.objectContaining({ type: 'redaction', class: 'pii', path: '/input/message', count: 1, step: 'triage' }),
      ]),
    );
    // Notes carry where and how many, never the content.
    expect(JSON.stringify(notes)).not.toContain('dana.whitfield');
    expect(log.filter((e) => e.kind === 'model.called')).toHaveLength(2);
    expect(JSON.stringify(log)).not.toContain('sk-e2e-key-123');
    expect(worker.stderr()).not.toContain('sk-e2e-key-123');
    // The same remit granting pii lets the provider see the address.
    const granted = await publish(demo.kernelUrl, REFUNDS_BUNDLE, { grants: ['pii'] });
    const run2 = await startRun(demo.kernelUrl, granted, { ...TICKET, ticket_id: 'T-4522' });
    await waitRun(demo.kernelUrl, run2, (s) => ['completed', 'failed', 'parked'].includes(s.state));
    expect(openai.sentText()).toContain('dana.whitfield@example.com');
    expect((await events(demo.kernelUrl, run2)).filter((e) => e.kind === 'note')).toEqual([]);
  });
});

describe('e2e: approvals (I 3; D 5.4)', () => {
  it('an approved action executes exactly once, by a worker process other than the one that proposed it', { timeout: 40_000 }, async () => {
    await using demo = await startDemoDaemon();
    // A short ttl: if the dead worker's pending long-poll still catches the re-leased step (its
    // FIN can reach svcd after the approval does), that lease expires within 5 s (D §6).
    await using first = spawnWorker(demo, ['--worker-id', 'first', '--ttl-seconds', '5']);
    const ids = await publish(demo.kernelUrl, REFUNDS_BUNDLE);
    const runId = await startRun(demo.kernelUrl, ids, TICKET);
    const parked = await waitRun(demo.kernelUrl, runId, (s) => s.state === 'parked', 15_000, () => `worker:\n${first.stderr()}\nsvcd:\n${demo.svcd.stderr().slice(-4000)}`);
    expect(parked.parked_reason).toBe('human');
    const approvalId = parked.pending_approval_id as string;
    // The proposing worker dies while the run waits for finance.
    await first.stop('SIGKILL');
    expect(demo.query(`SELECT * FROM refunds WHERE invoice_id = 'inv_1001'`)).toEqual([]);

    const decided = await ok(demo.kernelUrl, 'POST', `/approvals/${approvalId}`, { decision: 'approved', actor: FINANCE, reason: 'duplicate charge' });
    expect(decided.run_id).toBe(runId);
    await using second = spawnWorker(demo, ['--worker-id', 'second', '--ttl-seconds', '5']);
    const done = await waitRun(demo.kernelUrl, runId, (s) => s.state === 'completed', 15_000, () => `worker:\n${second.stderr()}\nsvcd:\n${demo.svcd.stderr().slice(-4000)}`);
    const rows = demo.query<{ id: string; amount: number; status: string; ticket_id: string }>(`SELECT id, amount, status, ticket_id FROM refunds WHERE invoice_id = 'inv_1001'`);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ amount: 180, status: 'issued', ticket_id: 'T-4521' });
    expect(done.output).toMatchObject({ id: rows[0]!.id, amount: 180 });

    const log = await events(demo.kernelUrl, runId);
    const decisions = log.filter((e) => e.kind === 'action.decided').map((e) => [e.payload.decision, e.payload.rule]);
    expect(decisions).toEqual([
      ['approval_required', 'refunds/large_refund'],
      ['allow', `approved:${approvalId}`],
    ]);
    const leased = log.filter((e) => e.kind === 'step.leased' && e.payload.step === 'refund').map((e) => e.payload.worker_id);
    expect(leased[0]).toBe('first');
    expect(leased.at(-1)).toBe('second');
    const replay = await ok(demo.kernelUrl, 'POST', `/runs/${runId}/replay`);
    expect(replay).toMatchObject({ chain_valid: true, state_matches: true, decision_mismatches: [] });
    expect(await waitOutput(second.stderr, 'step completed')).toContain('step completed');
  });
});

describe('e2e: abandon with compensation (D §6 abandon)', () => {
  it('abandoning a parked run voids the refund it already made, through the gateway', { timeout: 40_000 }, async () => {
    await using demo = await startDemoDaemon();
    await using worker = spawnWorker(demo, ['--concurrency', '2']);
    // The refunds workflow with a second, larger refund after the first: the first (40, within
    // the allow limit) executes, the second (500) parks for finance.
    const bundle = structuredClone(REFUNDS_BUNDLE);
    bundle.name = 'refunds-twice';
    bundle.mock.triage.output = { category: 'refund', amount: 40, reason: 'duplicate charge' };
    const wf = bundle.workflows.refund;
    wf.steps.push({
      id: 'goodwill',
      kind: 'action',
      tool: 'billing.refund',
      args: { invoice_id: '{{input.invoice_id}}', amount: 100.5, reason: 'goodwill', ticket_id: '{{input.ticket_id}}' },
    });
    const ids = await publish(demo.kernelUrl, bundle);
    const runId = await startRun(demo.kernelUrl, ids, TICKET);
    const parked = await waitRun(demo.kernelUrl, runId, (s) => s.state === 'parked');
    expect(parked.current_step).toBe('goodwill');
    const made = demo.query<{ id: string; status: string }>(`SELECT id, status FROM refunds WHERE invoice_id = 'inv_1001'`);
    expect(made).toEqual([{ id: parked.steps.refund.output.id, status: 'issued' }]);

    const abandoned = await ok(demo.kernelUrl, 'POST', `/runs/${runId}/abandon`, { reason: 'customer withdrew the ticket', actor: { id: 'ops-1', role: 'support-lead' } });
    expect(abandoned.compensations_scheduled).toBe(1);
    const end = await waitRun(demo.kernelUrl, runId, (s) => s.state === 'abandoned');
    expect(end.steps.refund.state).toBe('compensated');
    expect(demo.query(`SELECT id, status FROM refunds WHERE invoice_id = 'inv_1001'`)).toEqual([{ id: made[0]!.id, status: 'voided' }]);
    const log = await events(demo.kernelUrl, runId);
    const voidCalls = log.filter((e) => e.kind === 'tool.called' && e.payload.tool === 'billing.void_refund');
    expect(voidCalls).toHaveLength(1);
    expect(log.some((e) => e.kind === 'compensation.completed' && e.payload.step === 'refund')).toBe(true);
    expect(await waitOutput(worker.stderr, '"kind":"compensation"')).toContain('"kind":"compensation"');
    // The compensation's own write is the abandon at work, not a stray write to warn about.
    expect(demo.svcd.stderr()).not.toContain('recorded on a run after its abandon');
  });
});

describe('e2e: an action proposed inside a model step (I 3; D 5.4 action_id, D §6 prior_events)', () => {
  it('is approved once: the re-leased step replays the model answer and proposes the very same action', { timeout: 40_000 }, async () => {
    await using demo = await startDemoDaemon();
    await using worker = spawnWorker(demo);
    // The triage model proposes the refund itself, with no summary and its args' keys out of
    // sorted order: the worker writes the summary, and it must write the same one after the
    // model answer comes back from the event log (whose payloads are canonical JSON).
    const bundle = structuredClone(REFUNDS_BUNDLE);
    bundle.name = 'refunds-in-model';
    bundle.mock.triage.actions = [{ tool: 'billing.refund', args: { ticket_id: '{{input.ticket_id}}', invoice_id: '{{input.invoice_id}}', amount: 180, reason: 'duplicate' } }];
    bundle.workflows.refund.steps = bundle.workflows.refund.steps.filter((s: any) => s.id !== 'refund');
    const ids = await publish(demo.kernelUrl, bundle);
    const runId = await startRun(demo.kernelUrl, ids, TICKET);
    const parked = await waitRun(demo.kernelUrl, runId, (s) => s.state === 'parked', 15_000, () => worker.stderr());
    expect(parked.current_step).toBe('triage');
    const approvalId = parked.pending_approval_id as string;
    await ok(demo.kernelUrl, 'POST', `/approvals/${approvalId}`, { decision: 'approved', actor: FINANCE, reason: 'duplicate charge' });

    const done = await waitRun(demo.kernelUrl, runId, (s) => s.state !== 'running' && s.pending_approval_id !== approvalId, 15_000, () => worker.stderr());
    expect(done.state).toBe('completed');
    expect(demo.query(`SELECT amount FROM refunds WHERE invoice_id = 'inv_1001'`)).toEqual([{ amount: 180 }]);
    const log = await events(demo.kernelUrl, runId);
    const decided = log.filter((e) => e.kind === 'action.decided').map((e) => [e.payload.action_id, e.payload.decision]);
    expect(decided).toEqual([
      [decided[0]![0], 'approval_required'],
      [decided[0]![0], 'allow'],
    ]);
    expect(log.filter((e) => e.kind === 'approval.requested')).toHaveLength(1);
  });
});

describe('e2e: spend (I 8 "Spend is bounded by the remit\'s spend"; D §8)', () => {
  it('a model call that takes the run past its budget is the last one: no tool call, the run fails budget_exhausted', { timeout: 40_000 }, async () => {
    await using demo = await startDemoDaemon();
    // Every answer asks for another tool call; each call costs $10 (10 prompt tokens at $1 each).
    await using openai = await new FakeOpenAi(() => chatAnswer({ toolCalls: [{ id: 'call_1', name: 'billing__lookup_invoice', args: { invoice_id: 'inv_1001' } }] })).start();
    await using worker = spawnWorker(demo, ['--provider', 'openai'], { SVC_OPENAI_BASE_URL: `${openai.url}/v1`, SVC_OPENAI_MODEL: 'fake-model', SVC_OPENAI_USD_PER_1M_INPUT: '1000000' });
    const ids = await publish(demo.kernelUrl, REFUNDS_BUNDLE, { spend: { tokens: 1_000_000, usd: 5 } });
    const runId = await startRun(demo.kernelUrl, ids, TICKET);
    const done = await waitRun(demo.kernelUrl, runId, (s) => ['completed', 'failed', 'parked'].includes(s.state), 15_000, () => worker.stderr());
    expect(done).toMatchObject({ state: 'failed', error: { code: 'budget_exhausted' } });
    expect(openai.requests.length).toBe(1);
    const log = await events(demo.kernelUrl, runId);
    const failed = log.find((e) => e.kind === 'step.failed');
    expect(failed.payload).toMatchObject({ step: 'triage', error: { code: 'budget_exhausted' }, deterministic: true, usage: { usd: 10 } });
    // The lookup step's own gateway call happened before the model; none came after it.
    expect(log.filter((e) => e.kind === 'tool.called').map((e) => e.payload.step ?? null)).not.toContain('triage');
    expect(log.filter((e) => e.kind === 'budget.exceeded')).toHaveLength(1);
    // The worker's log says what became of the run, not only the step's outcome.
    const stepFailed = async () => {
      for (let i = 0; i < 50; i++) {
        const line = worker.stderr().split('\n').find((l) => l.includes('"msg":"step failed"'));
        if (line) return JSON.parse(line);
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`no "step failed" line in the worker's log:\n${worker.stderr()}`);
    };
    expect(await stepFailed()).toMatchObject({ step: 'triage', error: { code: 'budget_exhausted' }, outcome: 'quarantined', run_state: 'failed' });
  });
});
