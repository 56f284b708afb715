/**
 * What svcd's log says of runs at the default level (svcd(8) STARTUP AND SIGNALS, "Runs in
 * the log"): a run parked for a quarantine (warn) or a human (info), a run failed (warn), an
 * operator's resume and abandon (info) each leave one line with the run id, the step and the
 * code, so an on-call reading the log sees the drills without polling svc run list; inputs,
 * messages and reasons stay in the run's own log.
 */
import { describe, expect, it } from 'vitest';
import { capturedLogger } from '../gateway/helpers.js';
import { lease, pushBundle, sleep, startRun, startRunDaemon } from './run-fixtures.js';

describe('run lines in svcd\'s log (svcd(8))', () => {
  it('parked, failed, resumed and abandoned runs each leave a line naming the run, the step and the code', async () => {
    const { logger, text } = capturedLogger();
    await using d = await startRunDaemon({}, null, { logger });
    const bundle = await pushBundle(d);
    const lines = () =>
      text()
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => typeof l.msg === 'string' && (l.msg as string).startsWith('run '));

    // A deterministic failure parks the run for quarantine: warn, with the step's code.
    const a = await startRun(d, bundle, { autonomy: 'autonomous' });
    const l1 = await lease(d);
    await d.kernel_(`/leases/${l1.body.lease_id}/fail`, { body: { error: { code: 'deterministic_failure', message: 'secret-ish detail' }, deterministic: true } });
    // The operator resumes it.
    expect((await d.kernel_(`/runs/${a.run_id}/resume`, { body: { actor: { id: 'ops-1', role: 'oncall' } } })).status).toBe(200);

    // A run over its budget fails: warn, with budget_exhausted; abandoned by the operator: info.
    const b = await startRun(d, bundle, { autonomy: 'autonomous', spend: { tokens: 5, usd: 1 } });
    let l2 = await lease(d);
    while (l2.body.run_id !== b.run_id) {
      await d.kernel_(`/leases/${l2.body.lease_id}/fail`, { body: { error: { code: 'upstream_error', message: 'later' } } });
      await sleep(50);
      l2 = await lease(d);
    }
    await d.kernel_(`/leases/${l2.body.lease_id}/complete`, { body: { output: { category: 'refund', amount: 1, reason: 'x' }, usage: { tokens: 10, usd: 0 } } });
    expect((await d.kernel_(`/runs/${b.run_id}`)).body.state).toBe('failed');
    expect((await d.kernel_(`/runs/${b.run_id}/abandon`, { body: { reason: 'runaway', actor: { id: 'ops-1', role: 'oncall' } } })).status).toBe(202);

    const got = lines();
    expect(got).toContainEqual(expect.objectContaining({ level: 'warn', msg: 'run parked', run_id: a.run_id, step: l1.body.step, reason: 'quarantine', error: 'deterministic_failure' }));
    expect(got).toContainEqual(expect.objectContaining({ level: 'info', msg: 'run resumed', run_id: a.run_id, reason: 'quarantine', by: 'ops-1:oncall' }));
    expect(got).toContainEqual(expect.objectContaining({ level: 'warn', msg: 'run failed', run_id: b.run_id, error: 'budget_exhausted' }));
    expect(got).toContainEqual(expect.objectContaining({ level: 'info', msg: 'run abandon requested', run_id: b.run_id, by: 'ops-1:oncall', from_state: 'failed' }));
    expect(got).toContainEqual(expect.objectContaining({ msg: 'run abandoned', run_id: b.run_id, compensations_failed: 0 }));
    // Ids and codes only: the worker's message and the operator's reason stay in the run's log.
    expect(text()).not.toContain('secret-ish detail');
    expect(text()).not.toContain('runaway');
  });

  it('an actor\'s other members stay out of the line: by names it, never its caller\'s text (svcd(8) "Runs in the log")', async () => {
    const { logger, text } = capturedLogger();
    await using d = await startRunDaemon({}, null, { logger });
    const bundle = await pushBundle(d);
    const a = await startRun(d, bundle, { autonomy: 'autonomous' });
    const l1 = await lease(d);
    await d.kernel_(`/leases/${l1.body.lease_id}/fail`, { body: { error: { code: 'deterministic_failure', message: 'x' }, deterministic: true } });
    // recordedActor keeps members beyond id/role/worker_id: free text of the caller's.
    const note = 'free text from the caller '.repeat(200);
    expect((await d.kernel_(`/runs/${a.run_id}/resume`, { body: { actor: { worker_id: 'w1', note } } })).status).toBe(200);
    const resumed = text()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'run resumed');
    expect(resumed).toEqual([expect.objectContaining({ run_id: a.run_id, by: 'worker:w1' })]);
    expect(text()).not.toContain('free text from the caller');
  });
});
