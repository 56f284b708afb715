/**
 * svc run show's "next" line (svc(1), svc run show): a run that waits for someone says who
 * and with which command; one that goes on by itself or has ended says nothing.
 */
import { describe, expect, it } from 'vitest';
import { nextForRun } from '../../cli/commands/run.js';

const run = (state: string, parked_reason: string | null = null, pending_approval_id: string | null = null) => ({ run_id: 'run_1', state, parked_reason, pending_approval_id }) as Parameters<typeof nextForRun>[0];

describe('svc run show: what next (svc(1))', () => {
  it('names the command for each kind of wait, and nothing for a run that needs no one', () => {
    expect(nextForRun(run('parked', 'human', 'apr_1'))).toBe('svc: next: an approver decides apr_1 (svc approvals list --actor ID:ROLE), or svc run abandon run_1 --reason TEXT --actor ID:ROLE');
    expect(nextForRun(run('parked', 'quarantine'))).toContain('then svc run resume run_1 --actor ID:ROLE');
    expect(nextForRun(run('parked', 'connector_quarantined'))).toContain('released (svc gateway canaries, svc gateway release), svc run resume run_1');
    expect(nextForRun(run('failed'))).toBe('svc: next: the run will not go on by itself; svc run abandon run_1 --reason TEXT --actor ID:ROLE runs the compensations its completed steps declare');
    for (const s of ['running', 'completed', 'abandoning', 'abandoned']) expect(nextForRun(run(s))).toBeNull();
  });

  it('a step quarantined on template_invalid says resume will not help: the run keeps its bundle (svc-bundle(5) TEMPLATES)', () => {
    const stuck = (code: string) => ({ ...run('parked', 'quarantine'), current_step: 'release', steps: { release: { state: 'quarantined', attempt: 1, output: null, error: { code, message: 'm' }, started_at: null, ended_at: null } } }) as Parameters<typeof nextForRun>[0];
    const t = nextForRun(stuck('template_invalid'))!;
    expect(t).toContain('push it fixed under a new version (svc bundle push), then svc run abandon run_1 --reason TEXT --actor ID:ROLE and start the run again');
    expect(t).not.toContain('svc run resume');
    expect(nextForRun(stuck('deterministic_failure'))).toContain('then svc run resume run_1 --actor ID:ROLE');
  });

  it('a run abandoned with compensation_failed names svc run retry-compensations (docs/design.md "Retrying compensations")', () => {
    const given = { ...run('abandoned'), error: { code: 'compensation_failed', message: 'compensation failed for step(s) refund' } } as Parameters<typeof nextForRun>[0];
    expect(nextForRun(given)).toBe(
      "svc: next: compensation failed for step(s) refund, so those steps' writes stand; once what the error says is repaired, svc run retry-compensations run_1 --reason TEXT --actor ID:ROLE runs them again, or undo the writes by hand",
    );
    // Abandoned clean, or abandoned after a budget failure: nothing for anyone to do.
    expect(nextForRun({ ...run('abandoned'), error: { code: 'budget_exhausted', message: 'over' } } as Parameters<typeof nextForRun>[0])).toBeNull();
  });
});
