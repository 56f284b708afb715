/**
 * `svc approvals list|approve|reject` (the built binary) against a real svcd on port 0
 * (issue 5; interface 3 approval rows, 4.1 GET/POST /approvals, 7.1 not_the_approver and
 * already_decided; decisions 5.4 approver check and no self-approval).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSvc } from '../helpers/cli.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { parkRun, testPublisher, type KernelCall, type ParkedRun } from '../tui/parked-run.js';

const publisher = testPublisher();
let d: TestDaemon;
let call: KernelCall;
const svc = (args: string[]) => runSvc(['--kernel-url', d.kernelUrl!, ...args]);

beforeAll(async () => {
  d = await startTestDaemon({ kernel: { publishers: [publisher.spec] } });
  call = (method, path, body) => d.kernel_(path, { method, body });
});
afterAll(async () => {
  await d?.[Symbol.asyncDispose]();
});

describe('svc approvals against a live svcd (I 4.1, D 5.4)', () => {
  let p1: ParkedRun;
  let p2: ParkedRun;

  beforeAll(async () => {
    p1 = await parkRun(call, publisher, 'INV-1', 150);
    p2 = await parkRun(call, publisher, 'INV-2', 250);
  });

  it('lists the pending approvals of the actor role, newest first', async () => {
    const r = await svc(['--json', '--actor', 'fin-1:finance', 'approvals', 'list']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const list = JSON.parse(r.stdout) as Array<{ approval_id: string; approver: string; state: string; action: { tool: string; args: unknown } }>;
    expect(list.map((a) => a.approval_id)).toEqual([p2.approval_id, p1.approval_id]);
    expect(list[0]).toMatchObject({ approver: 'role:finance', state: 'pending', action: { tool: 'billing.refund', args: { invoice_id: 'INV-2', amount: 250 } } });
    const other = await svc(['--json', '--actor', 'leg-1:legal', 'approvals', 'list']);
    expect(JSON.parse(other.stdout)).toEqual([]);
  });

  it('refuses the wrong role and the requester (403 not_the_approver, exit 1)', async () => {
    const wrongRole = await svc(['--actor', 'leg-1:legal', 'approvals', 'approve', p1.approval_id]);
    expect(wrongRole.code).toBe(1);
    expect(wrongRole.stderr).toContain(`not_the_approver: leg-1 (role:legal) may not decide ${p1.approval_id}`);
    const self = await svc(['--actor', 'alice:finance', 'approvals', 'approve', p1.approval_id]);
    expect(self.code).toBe(1);
    expect(self.stderr).toContain('not_the_approver');
    expect(self.stderr).toContain('alice requested run');
    expect((await call('GET', `/approvals/${p1.approval_id}`)).body.state).toBe('pending');
  });

  it('rejects with a reason; the run returns to running', async () => {
    const r = await svc(['--actor', 'fin-1:finance', 'approvals', 'reject', p1.approval_id, '--reason', 'duplicate refund']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`rejected ${p1.approval_id}; run ${p1.run_id} is running\n`);
    expect((await call('GET', `/approvals/${p1.approval_id}`)).body).toMatchObject({
      state: 'rejected',
      decision: 'rejected',
      actor: { id: 'fin-1', role: 'finance' },
      reason: 'duplicate refund',
    });
    expect((await call('GET', `/runs/${p1.run_id}`)).body.state).toBe('running');
  });

  it('a second decision loses the race: exit 1, naming who decided, how and why (409 already_decided)', async () => {
    const r = await svc(['--actor', 'fin-2:finance', 'approvals', 'approve', p1.approval_id]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^svc: already_decided: ${p1.approval_id} was already rejected by fin-1 \\(role:finance\\) at \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z: duplicate refund\\n$`));
  });

  it('approves; list --state filters by state', async () => {
    const r = await svc(['--json', '--actor', 'fin-2:finance', 'approvals', 'approve', p2.approval_id, '--reason', 'ok']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ approval_id: p2.approval_id, decision: 'approved', run_id: p2.run_id, run_state: 'running' });
    const pending = await svc(['--json', '--actor', 'fin-1:finance', 'approvals', 'list']);
    expect(JSON.parse(pending.stdout)).toEqual([]);
    const table = await svc(['--actor', 'fin-1:finance', 'approvals', 'list', '--state', 'all']);
    const rows = table.stdout.trim().split('\n');
    expect(rows).toHaveLength(3);
    expect(rows[1]).toMatch(new RegExp(`^${p2.approval_id}\\s+\\S+\\s+approved\\s+role:finance\\s+billing\\.refund\\s+${p2.run_id}\\s+default/sor_write$`));
    expect(rows[2]).toMatch(new RegExp(`^${p1.approval_id}\\s+\\S+\\s+rejected\\s`));
  });
});
