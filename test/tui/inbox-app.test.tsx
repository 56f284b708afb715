/**
 * The inbox wired to its data layer over a fake kernel (issue 5; interface 3 approval rows,
 * 4.1 POST /approvals/{id}; decisions 5.4): live refresh, approve, reject with a reason, a
 * lost race (409 already_decided), a refusal (403 not_the_approver), an unreachable daemon.
 */
import { describe, expect, it } from 'vitest';
import { ApprovalsApi } from '../../cli/tui/approvals-api.js';
import { InboxApp } from '../../cli/tui/InboxApp.js';
import { InboxSource } from '../../cli/tui/inbox-source.js';
import { FakeKernel, approval, runOf } from './fake-kernel.js';
import { KEY, renderTui } from './render.js';

const FIN = { id: 'fin-1', role: 'finance' };
const NOW = () => Date.parse('2026-01-01T10:05:00.000Z');

function app(k: FakeKernel, actor = FIN, timeoutMs?: number) {
  const source = new InboxSource({ api: new ApprovalsApi({ baseUrl: 'http://127.0.0.1:7401', fetch: k.fetch, timeoutMs }), actor, intervalMs: 40 });
  const t = renderTui(<InboxApp source={source} width={80} height={24} now={NOW} />);
  return { t, source };
}

describe('svc approvals inbox against the kernel API (I 4.1, D 5.4)', () => {
  it('shows the empty inbox, then a new approval as soon as it is created (refreshed live)', async () => {
    const k = new FakeKernel();
    const { t } = app(k);
    await t.waitFor('No pending approvals for role:finance');
    k.add(approval(1));
    const f = await t.waitFor('1 pending');
    expect(f).toMatch(/Action\s+billing\.refund/);
    expect(await t.waitFor('#6 approval.requested')).toMatch(/Usage\s+1,200 \/ 10,000 tokens/);
  });

  it('approves with a then Enter: the kernel gets the decision and the actor, the approval leaves', async () => {
    const k = new FakeKernel();
    const a1 = k.add(approval(1));
    const a2 = k.add(approval(2));
    const { t } = app(k);
    await t.waitFor('2 pending');
    await t.press('a');
    await t.waitFor('Reason (optional):');
    await t.press(KEY.enter);
    const f = await t.waitFor('1 pending');
    expect(f).toContain(`Approved billing.refund; run ${a2.run_id} is running`);
    expect(f).toContain('"invoice_id": "INV-1"');
    const post = k.calls.find((c) => c.method === 'POST')!;
    expect(post.path).toBe(`/approvals/${a2.approval_id}`);
    expect(post.body).toEqual({ decision: 'approved', actor: FIN, reason: '' });
    expect(k.approvals.get(a1.approval_id)!.state).toBe('pending');
  });

  it('rejects with the reason typed into the prompt', async () => {
    const k = new FakeKernel();
    const a = k.add(approval(1));
    const { t } = app(k);
    await t.waitFor('1 pending');
    await t.press('r');
    await t.waitFor('Reason (required):');
    await t.type('duplicate of INV-0');
    await t.press(KEY.enter);
    await t.waitFor('No pending approvals for role:finance');
    expect(t.frame()).toContain(`Rejected billing.refund; run ${a.run_id} is running`);
    expect(k.calls.find((c) => c.method === 'POST')!.body).toEqual({ decision: 'rejected', actor: FIN, reason: 'duplicate of INV-0' });
    expect(k.approvals.get(a.approval_id)).toMatchObject({ state: 'rejected', reason: 'duplicate of INV-0' });
  });

  it('a decision that lost a race says who decided what, and the list is refreshed', async () => {
    const k = new FakeKernel();
    const a1 = k.add(approval(1));
    const a2 = k.add(approval(2));
    const { t } = app(k);
    await t.waitFor('2 pending');
    await t.press('a');
    await t.waitFor('Reason (optional):');
    // fin-2 decides between our prompt opening and our Enter.
    k.decideAs(a2.approval_id, 'rejected', { id: 'fin-2', role: 'finance' }, 'duplicate refund', '2026-01-01T10:04:59.000Z');
    await t.press(KEY.enter);
    const f = await t.waitFor('Too late');
    expect(f).toContain(`Too late: ${a2.approval_id} was already decided`);
    expect(f).toContain('Rejected by fin-2 (role:finance) at 10:04:59Z.');
    expect(f).toContain('Reason: duplicate refund');
    expect(f).toContain('Your approval was not recorded.');
    await t.press(' ');
    const after = await t.waitFor('1 pending');
    expect(after).toContain('"invoice_id": "INV-1"');
    expect(k.approvals.get(a1.approval_id)!.state).toBe('pending');
    expect(k.approvals.get(a2.approval_id)).toMatchObject({ state: 'rejected', actor: { id: 'fin-2' } });
  });

  it('a paste never decides: "a⏎⏎⏎a⏎", an approval id or a word with a newline opens the prompt at most (svc-approvals(1) Keys)', async () => {
    const k = new FakeKernel();
    k.add(approval(1));
    const a2 = k.add(approval(2));
    const { t } = app(k);
    await t.waitFor('2 pending');
    for (const paste of ['a\r\r\ra\r', `${a2.approval_id}\n`, 'banana\r']) {
      t.stdin.write(paste);
      await t.waitFor(`Approve billing.refund (${a2.approval_id})?`);
      expect(t.frame()).toContain('Reason (optional):');
      await t.press(KEY.escape);
      await t.waitFor('a approve · r reject');
    }
    // Ctrl+A (screen's prefix, readline's line start) and Alt+A are not `a`.
    await t.press('\u0001');
    await t.press('\u001ba');
    expect(t.frame()).not.toContain('Approve billing.refund');
    expect(k.calls.filter((c) => c.method === 'POST')).toEqual([]);
    expect(k.approvals.get(a2.approval_id)!.state).toBe('pending');
  });

  it('a⏎⏎⏎a⏎ typed faster than the list refreshes: the second decision meets the first, and the screen says it was this inbox\'s, recorded (svc-approvals(1) Screens)', async () => {
    const k = new FakeKernel();
    k.add(approval(1));
    const a2 = k.add(approval(2));
    const { t } = app(k);
    await t.waitFor('2 pending');
    for (const key of ['a', '\r', '\r', '\r', 'a', '\r']) t.stdin.write(key); // one key each, no render between
    const f = await t.waitFor(/Already|Too late/);
    const posts = k.calls.filter((c) => c.method === 'POST');
    expect(posts.map((c) => c.path)).toEqual([`/approvals/${a2.approval_id}`, `/approvals/${a2.approval_id}`]);
    expect(f).toContain(`Already approved by you: ${a2.approval_id}`);
    expect(f).toContain('Your approval as fin-1, from this inbox at 10:59:00Z, was recorded.');
    expect(f).toContain('This second approval changed nothing.');
    expect(f).not.toContain('Too late');
    expect(f).not.toContain('not recorded');
    expect(k.approvals.get(a2.approval_id)).toMatchObject({ state: 'approved', actor: FIN });
  });

  it('the same actor deciding elsewhere (another terminal) is still "Too late": only this inbox\'s own decisions say "by you"', async () => {
    const k = new FakeKernel();
    const a = k.add(approval(1));
    const { t } = app(k);
    await t.waitFor('1 pending');
    await t.press('a');
    await t.waitFor('Reason (optional):');
    k.decideAs(a.approval_id, 'approved', FIN, 'from my other terminal', '2026-01-01T10:04:59.000Z');
    await t.press(KEY.enter);
    const f = await t.waitFor('Too late');
    expect(f).toContain('Approved by fin-1 (role:finance) at 10:04:59Z.');
    expect(f).toContain('Your approval was not recorded.');
    expect(f).not.toContain('Already approved by you');
  });

  it('a refusal (403 not_the_approver) says why: no self-approval', async () => {
    const k = new FakeKernel();
    const a = approval(1);
    k.add(a, runOf(a, { requested_by: { id: 'fin-1', role: 'finance', manager: 'finance' } }));
    const { t } = app(k);
    await t.waitFor('#6 approval.requested');
    await t.press('a');
    await t.waitFor('Reason (optional):');
    await t.press(KEY.enter);
    const f = await t.waitFor('Not allowed');
    expect(f).toContain('fin-1 requested this run; a requester cannot approve their own run.');
    await t.press('x');
    await t.waitFor('1 pending');
    expect(k.approvals.get(a.approval_id)!.state).toBe('pending');
  });

  it('a decision svcd took without answering in time is not reported as failed; once the list shows it gone, the line says so', async () => {
    const k = new FakeKernel();
    k.add(approval(1));
    const a2 = k.add(approval(2));
    const { t } = app(k, FIN, 150);
    await t.waitFor('2 pending');
    k.silentAfterPost = true;
    await t.press('a');
    await t.waitFor('Reason (optional):');
    await t.press(KEY.enter);
    // Unconfirmed, never "Could not": it was recorded, and the refreshed list shows it gone,
    // so the line says so instead of standing as a failure.
    const f = await t.waitFor(`${a2.approval_id} has left the inbox (decided)`);
    expect(f).not.toContain('Could not');
    expect(f).toContain('1 pending');
    expect(k.approvals.get(a2.approval_id)!.state).toBe('approved');
  });

  it('names the URL of an unreachable daemon, keeps retrying, and comes back by itself', async () => {
    const k = new FakeKernel();
    k.add(approval(1));
    k.down = true;
    const { t } = app(k);
    await t.waitFor('Cannot reach svcd at http://127.0.0.1:7401');
    await t.waitFor(/\([3-9]\d* attempts\)|\(\d{2,} attempts\)/);
    k.down = false;
    await t.waitFor('1 pending');
  });

  it('q quits and stops polling', async () => {
    const k = new FakeKernel();
    k.add(approval(1));
    const { t } = app(k);
    await t.waitFor('1 pending');
    await t.press('q');
    await new Promise((r) => setTimeout(r, 60));
    const n = k.calls.length;
    await new Promise((r) => setTimeout(r, 150));
    expect(k.calls.length).toBe(n);
  });
});
