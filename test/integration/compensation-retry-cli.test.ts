/**
 * `svc run retry-compensations` against a live svcd (svc(1); docs/design.md "Retrying
 * compensations"; D §6 abandon, §11 svc): the on-call drill from `svc run show`'s next line
 * to the retried compensation, its messages with and without --json, exit codes (0 ok,
 * 1 refused, 2 usage). Needs `npm run build` first (the built binary).
 */
import { describe, expect, it } from 'vitest';
import { runSvc } from '../helpers/cli.js';
import { getRun, lease, leaseAndComplete, pushBundle, refundsBundle, startRun, startRunDaemon, type RunDaemon } from './run-fixtures.js';

/** A refunds run whose refund (rf-77) completed and whose refund-void then failed for good. */
async function compensationGivenUp(d: RunDaemon): Promise<string> {
  const b = refundsBundle();
  b.tools!['billing.notify'] = { writes: false };
  b.workflows.refund!.steps.push({ id: 'notify', kind: 'tool', tool: 'billing.notify', args: {} });
  const { run_id } = await startRun(d, await pushBundle(d, b), { autonomy: 'autonomous' });
  await leaseAndComplete(d, { amount: 20 });
  await leaseAndComplete(d, { rows: 2 });
  await leaseAndComplete(d, { id: 'rf-77' });
  expect((await d.kernel_(`/runs/${run_id}/abandon`, { body: { reason: 'wrong customer', actor: { id: 'ops-1', role: 'ops' } } })).status).toBe(202);
  const c = await lease(d, ['compensation']);
  await d.kernel_(`/leases/${c.body.lease_id}/fail`, { body: { error: { code: 'upstream_down', message: 'billing is down' }, deterministic: true } });
  expect(await getRun(d, run_id)).toMatchObject({ state: 'abandoned', error: { code: 'compensation_failed' } });
  return run_id;
}

describe('svc run retry-compensations (svc(1))', () => {
  it('the on-call drill: show names the command, the retry runs the compensation again, a repeat is harmless, then it refuses', async () => {
    await using d = await startRunDaemon();
    const env = { SVC_KERNEL_URL: d.kernelUrl! };
    const ops = { ...env, SVC_ACTOR: 'ops-1:ops' };
    const runId = await compensationGivenUp(d);

    const show = await runSvc(['run', 'show', runId], env);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/error\s+compensation_failed: compensation failed for step\(s\) refund/);
    expect(show.stderr).toBe(
      `svc: next: compensation failed for step(s) refund, so those steps' writes stand; once what the error says is repaired, svc run retry-compensations ${runId} --reason TEXT --actor ID:ROLE runs them again, or undo the writes by hand\n`,
    );

    // What the on-call tries first is refused as svcd always refused it, and says what helps instead.
    const nextLine = `svc: next: compensation failed for step(s) refund, so those steps' writes stand; once what the error says is repaired, svc run retry-compensations ${runId} --reason TEXT --actor ID:ROLE runs them again, or undo the writes by hand\n`;
    const abandonAgain = await runSvc(['run', 'abandon', runId, '--reason', 'try again'], ops);
    expect(abandonAgain.code).toBe(1);
    expect(abandonAgain.stderr).toBe(`svc: invalid_state: run ${runId} is abandoned; it can no longer be abandoned\n${nextLine}`);
    const resume = await runSvc(['run', 'resume', runId], ops);
    expect(resume.code).toBe(1);
    expect(resume.stderr).toBe(`svc: invalid_state: run ${runId} is abandoned; only a parked run can be resumed\n${nextLine}`);
    const resumeJson = await runSvc(['--json', 'run', 'resume', runId], ops);
    expect(JSON.parse(resumeJson.stdout)).toMatchObject({ error: { code: 'invalid_state', details: { state: 'abandoned' } } }); // svcd's answer, unchanged

    // An operator's action: who did it is required, as for abandon and resume.
    const anonymous = await runSvc(['run', 'retry-compensations', runId], env);
    expect(anonymous.code).toBe(2);
    expect(anonymous.stderr).toContain('an actor is required: pass --actor ID:ROLE or set SVC_ACTOR');

    const retried = await runSvc(['run', 'retry-compensations', runId, '--reason', 'billing repaired'], ops);
    expect(retried.code, retried.stderr).toBe(0);
    expect(retried.stdout).toBe(`run ${runId} abandoning: 1 compensation(s) scheduled again (refund); svc run events ${runId} --follow shows them end\n`);
    expect(retried.stderr).toBe('');
    // Submitted twice: the same answer, nothing more recorded.
    const twice = await runSvc(['--json', 'run', 'retry-compensations', runId, '--reason', 'billing repaired'], ops);
    expect(twice.code).toBe(0);
    expect(JSON.parse(twice.stdout)).toEqual({ run_id: runId, state: 'abandoning', compensations_scheduled: 1, steps: ['refund'] });

    const events = await runSvc(['run', 'events', runId], env);
    const line = events.stdout.split('\n').filter((l) => l.includes('compensation.retry_requested'));
    expect(line).toHaveLength(1);
    expect(line[0]).toMatch(/compensation\.retry_requested  ops-1:ops\s+reason=billing repaired steps=refund$/);

    const c = await lease(d, ['compensation']);
    expect(c.body).toMatchObject({ step: 'refund', attempt: 1, step_def: { args: { refund_id: 'rf-77' } } });
    await d.kernel_(`/leases/${c.body.lease_id}/complete`, { body: { output: { voided: 'rf-77' } } });
    const after = await runSvc(['run', 'show', runId], env);
    expect(after.stdout).toMatch(/state\s+abandoned/);
    expect(after.stdout).toMatch(/refund\s+compensated/);
    expect(after.stdout).not.toMatch(/^error/m);
    expect(after.stderr).toBe(''); // nothing left for anyone to do
    const abandonDone = await runSvc(['run', 'abandon', runId, '--reason', 'again'], ops);
    expect(abandonDone.stderr).toBe(`svc: invalid_state: run ${runId} is abandoned; it can no longer be abandoned\n`); // no next line now
    expect((await runSvc(['run', 'replay', runId], env)).code).toBe(0);

    const nothing = await runSvc(['run', 'retry-compensations', runId], ops);
    expect(nothing.code).toBe(1);
    expect(nothing.stderr).toBe(`svc: invalid_state: run ${runId} is abandoned and none of its compensations failed for good: there is nothing to retry\n`);
  });

  it('--help says what it does and who must be named; an empty --reason is a usage error', async () => {
    const help = await runSvc(['run', 'retry-compensations', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Usage: svc run retry-compensations [options] <id>');
    const text = help.stdout.replace(/\s+/g, ' ');
    expect(text).toContain('run again the compensations of an abandoned run that failed for good (compensation_failed), once their cause is repaired (who: --actor or SVC_ACTOR, required)');
    expect(text).toContain('--reason <text> why, recorded in the log');
    expect(text).toContain('Asked again while they run, it answers the same and records nothing');
    expect((await runSvc(['run', '--help'])).stdout).toContain('retry-compensations');
    const empty = await runSvc(['run', 'retry-compensations', 'run_x', '--reason', ''], { SVC_ACTOR: 'ops-1:ops' });
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('--reason must not be empty');
  });
});
